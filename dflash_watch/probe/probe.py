"""``Probe``: two lines in a training loop, one probe line per step.

    probe = Probe()
    for batch in loader:
        ...
        probe.step(batch=batch["input_ids"], attention_mask=batch["attention_mask"])

Lines are buffered and written every ``every_steps`` steps or
``every_s`` seconds, whichever comes first, and at exit (``atexit``, or
``close()``). A step costs a few dictionary operations, a clock read and,
with a mask, a reference to it (counted at the flush, or on a GPU a
reduction launched now and fetched at the flush, see ``batch.py``); the
allocator and compiler figures are read per step from host-side counters. Nothing here ever raises into the training loop.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from .batch import from_batch, is_tensor, resolve, value
from .torch_stats import CompileCounter, cuda_memory, detect_rank
from .writer import DEFAULT_MAX_BYTES, ProbeWriter

ENV_DIR = "DFLASH_PROBE_DIR"
_COUNTED = ("tokens", "padded_tokens")
# The training-health floats of a step (CONTRACTS section 9, issue 19). A
# loss handed over as a tensor stays one until the flush (``.item()`` per
# step would sync the host with the GPU); NaN and Inf are written as such.
HEALTH_FIELDS = ("loss", "grad_norm", "loss_scale", "step_seconds", "compute_seconds", "wait_seconds")


def default_path(rank: int) -> str:
    """``dflash-probe-rank{rank}.jsonl`` in ``$DFLASH_PROBE_DIR``, else the working directory."""
    return os.path.join(os.environ.get(ENV_DIR) or os.getcwd(), f"dflash-probe-rank{rank}.jsonl")


class Probe:
    """Per-step batch, allocator and compiler figures, written as probe lines.

    ``path``: the file (default ``default_path(rank)``); ``rank``: default
    torch.distributed's, else ``RANK``/``LOCAL_RANK``, else 0, taken at the
    first write (the process group is often set up after the probe).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        rank: int | None = None,
        every_steps: int = 50,
        every_s: float = 10.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        pad_token_id: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = None if path is None else os.fspath(path)
        self._rank = rank
        self.every_steps = max(1, int(every_steps))
        self.every_s = float(every_s)
        self.max_bytes = max_bytes
        self.pad_token_id = pad_token_id
        self._clock = clock
        self._pending: list[dict[str, Any]] = []
        self._last_flush = clock()
        self._steps = 0
        self._writer: ProbeWriter | None = None
        self._warned = False
        self._closed = False
        atexit.register(self.close)

    @property
    def path(self) -> str:
        """The file written (known once the rank is: at the first write, or now)."""
        return self._open().path

    @property
    def writer(self) -> ProbeWriter:
        return self._open()

    def step(
        self,
        batch: Any = None,
        attention_mask: Any = None,
        *,
        tokens: Any = None,
        padded_tokens: Any = None,
        batch_size: int | None = None,
        seq_len: int | None = None,
        step: int | None = None,
        loss: Any = None,
        grad_norm: Any = None,
        loss_scale: Any = None,
        step_seconds: float | None = None,
        compute_seconds: float | None = None,
        wait_seconds: float | None = None,
    ) -> None:
        """One training step: the batch (tensor or mapping) and its mask, or the counts.

        Counts given as numbers win over what the batch says. ``step``
        defaults to this probe's own count of steps. ``loss``, ``grad_norm``
        and ``loss_scale`` may be numbers or 0-d tensors (read at the
        flush); ``step_seconds`` is the whole step's wall time,
        ``compute_seconds`` the rank's own work in it and ``wait_seconds``
        its time in collectives or waiting for data: the split names a
        slow rank, since under DDP every rank's step takes as long.
        """
        if self._closed:
            return
        try:
            self._steps += 1
            line: dict[str, Any] = {"time": self._clock(), "step": self._steps if step is None else int(step)}
            if batch is not None or attention_mask is not None:
                from_batch(batch, attention_mask, self.pad_token_id, line)
            if tokens is not None:
                line["tokens"] = value(tokens)
            if padded_tokens is not None:
                line["padded_tokens"] = value(padded_tokens)
            if batch_size is not None:
                line["batch_size"] = int(batch_size)
            if seq_len is not None:
                line["seq_len"] = int(seq_len)
            _health(line, loss, grad_norm, loss_scale, step_seconds, compute_seconds, wait_seconds)
            cuda_memory(line)
            CompileCounter.read(line)
            self._pending.append(line)
            if len(self._pending) >= self.every_steps or line["time"] - self._last_flush >= self.every_s:
                self.flush()
        except Exception as exc:  # noqa: BLE001 - never into training
            self._warn(exc)

    def amend(self, step: int | None = None, **figures: Any) -> None:
        """Add figures known only after the step's line (HF's ``on_log``
        comes after ``on_step_end``): to the buffered line of ``step`` when
        it is the last one, else as a line of their own. Keys of
        ``HEALTH_FIELDS`` only; None values are left out."""
        if self._closed:
            return
        try:
            known = {k: v for k, v in figures.items() if k in HEALTH_FIELDS and v is not None}
            if not known:
                return
            last = self._pending[-1] if self._pending else None
            if last is not None and (step is None or last.get("step") == step):
                last.update(known)
                return
            line: dict[str, Any] = {"time": self._clock(), "step": self._steps if step is None else int(step)}
            line.update(known)
            self._pending.append(line)
        except Exception as exc:  # noqa: BLE001 - never into training
            self._warn(exc)

    def flush(self) -> None:
        """Write the buffered lines now (one device transfer, one write)."""
        try:
            lines, self._pending = self._pending, []
            self._last_flush = self._clock()
            if not lines:
                return
            writer = self._open()
            rank = self._rank
            for key in _COUNTED:
                idx = [i for i, line in enumerate(lines) if key in line]
                for i, number in zip(idx, resolve([lines[i][key] for i in idx])):
                    lines[i][key] = number
            for line in lines:
                for key in HEALTH_FIELDS:
                    if key in line and type(line[key]) is not float:
                        figure = _as_float(line[key])
                        if figure is None:
                            del line[key]
                        else:
                            line[key] = figure
            writer.write_lines({"time": line.pop("time"), "rank": rank, **line} for line in lines)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def close(self) -> None:
        """Flush and close; later steps are ignored. Safe to call twice (and at exit)."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        try:
            atexit.unregister(self.close)
        except Exception:  # noqa: BLE001
            pass
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> ProbeWriter:
        if self._writer is None:
            if self._rank is None:
                self._rank = detect_rank()
            path = self._path or default_path(self._rank)
            self._writer = ProbeWriter(path, max_bytes=self.max_bytes)
        return self._writer

    def _warn(self, exc: Exception) -> None:
        if self._warned:
            return
        self._warned = True
        try:
            sys.stderr.write(f"dflash-watch probe: {type(exc).__name__}: {exc} "
                             "(the probe goes on; training is not affected)\n")
        except Exception:  # noqa: BLE001
            pass


def _health(line: dict[str, Any], loss: Any, grad_norm: Any, loss_scale: Any, step_seconds: Any,
            compute_seconds: Any, wait_seconds: Any) -> None:
    """The health figures given (None: not known, left out of the line)."""
    for key, number in (("loss", loss), ("grad_norm", grad_norm), ("loss_scale", loss_scale),
                        ("step_seconds", step_seconds), ("compute_seconds", compute_seconds),
                        ("wait_seconds", wait_seconds)):
        if number is not None:
            line[key] = number if is_tensor(number) else float(number)


def _as_float(number: Any) -> float | None:
    """A float of a number or a one-element tensor (on the device: fetched
    now, at the flush); None for anything else (the figure is left out)."""
    try:
        if is_tensor(number):
            return float(number.detach().float().item())
        return float(number)
    except Exception:  # noqa: BLE001 - a figure lost, never the line
        return None
