"""What torch itself knows about the process: allocator, compiler, rank.

Read without importing anything the training has not imported already:
torch is taken from ``sys.modules`` (a loop that hands the probe tensors
has it), ``torch._dynamo`` only once the training compiled something, and
CUDA only once it is initialised. A CPU run's allocator figures are then
absent from the line, never zero: zero would claim "no retries" where
nobody counted.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

# torch.cuda.memory_stats() keys -> probe line keys.
CUDA_KEYS = (
    ("num_alloc_retries", "alloc_retries"),
    ("reserved_bytes.all.current", "reserved_bytes"),
    ("allocated_bytes.all.current", "allocated_bytes"),
    ("inactive_split_bytes.all.current", "inactive_split_bytes"),
)


_cuda: Any = None  # torch.cuda, once torch is loaded


def cuda_memory(out: dict[str, Any]) -> dict[str, Any]:
    """The caching allocator's figures of the current device into ``out``; none without CUDA.

    ``memory_stats`` reads host-side counters: no kernel, no sync. It is
    asked only when CUDA is already initialised, so a probe never creates
    a CUDA context (hundreds of MB on a GPU) in a process that had none.
    ``is_initialized`` alone: an initialised CUDA is an available one, and
    it is a flag read (0.1 us) where ``is_available`` asks the driver.
    """
    global _cuda
    cuda = _cuda
    if cuda is None:
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None) if torch is not None else None
        if cuda is None:
            return out
        _cuda = cuda
    if not cuda.is_initialized():
        return out
    stats = cuda.memory_stats()
    for key, name in CUDA_KEYS:
        if key in stats:
            out[name] = int(stats[key])
    return out


class CompileCounter:
    """Recompiles and graph breaks of torch.compile, cumulative for the process.

    torch 2.13 keeps no recompile counter in ``torch._dynamo.utils.counters``
    (``frames.total`` counts first compiles, graph-break resumes and
    recompiles alike). A compile-start callback tells them apart: its
    ``compile_id`` is ``frame/attempt-on-that-frame``, and an attempt
    above 0 is a recompile. The callback is registered once per process,
    when the probe first sees dynamo loaded: a frame's first compile may
    come before that, but a recompile is counted from its id whenever it
    comes. Graph breaks are ``counters["graph_break"]`` (one key per reason).
    """

    _lock = threading.Lock()
    _counters: Any = None  # dynamo's counters, once installed
    recompiles = 0

    @staticmethod
    def is_recompile(compile_id: Any) -> bool:
        """``"0/3"`` (or compiled autograd's ``"!1/0/3"``): the fourth compile of frame 0."""
        parts = str(compile_id).lstrip("!").split("/")
        try:
            return len(parts) >= 2 and int(parts[-1]) > 0
        except ValueError:
            return False

    @classmethod
    def _on_compile_start(cls, args: Any) -> None:
        try:
            # Only dynamo's own compiles: a training graph's backward is
            # compiled lazily at its first backward (AOTAutograd, under
            # inductor or aot_eager) and cudagraphs record at run time, each
            # calling back with the compile id of the frame it belongs to.
            # Counted, every recompile of a training step counted twice (seen
            # on an H200 under inductor: 6 for dynamo's 3). Torch without the
            # trigger field called back for dynamo alone.
            trigger = getattr(args, "callback_trigger", None)
            if trigger is not None and getattr(trigger, "name", "DYNAMO") != "DYNAMO":
                return
            if cls.is_recompile(args.compile_id):
                cls.recompiles += 1
        except Exception:  # noqa: BLE001 - never into a compile
            pass

    @classmethod
    def _install(cls, dynamo: Any) -> None:
        """Register the callback; count the recompiles dynamo already recorded
        (its last 64 compiles, ``get_compilation_metrics``) so that a probe
        made after the first steps still sees the ones they caused."""
        utils = sys.modules.get("torch._dynamo.utils")
        try:
            metrics = utils.get_compilation_metrics() if utils is not None else []
            cls.recompiles += sum(1 for m in metrics if cls.is_recompile(getattr(m, "compile_id", None)))
        except Exception:  # noqa: BLE001
            pass
        handler = getattr(dynamo, "callback_handler", None)
        if handler is not None:
            handler.register_start_callback(cls._on_compile_start)

    @classmethod
    def read(cls, out: dict[str, Any]) -> dict[str, Any]:
        """``recompiles`` and ``graph_breaks`` into ``out``; none while dynamo is not loaded."""
        counters = cls._counters
        if counters is None:
            dynamo = sys.modules.get("torch._dynamo")
            if dynamo is None:
                return out
            with cls._lock:
                if cls._counters is None:
                    utils = sys.modules.get("torch._dynamo.utils")
                    counters = getattr(utils, "counters", None)
                    cls._counters = {} if counters is None else counters  # an empty one is falsy
                    try:  # once, even if it fails: a callback registered twice counts twice
                        cls._install(dynamo)
                    except Exception:  # noqa: BLE001
                        pass
            counters = cls._counters
        out["recompiles"] = cls.recompiles
        if counters is not None:
            breaks = counters.get("graph_break")
            out["graph_breaks"] = sum(breaks.values()) if breaks else 0
        return out


def detect_rank() -> int:
    """torch.distributed's rank once it is initialised, else ``RANK`` / ``LOCAL_RANK``, else 0."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001
        pass
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0
