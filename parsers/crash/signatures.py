"""What a crash is: detector, kind and cause, and a signature that names it.

The assembler (parsers/tracebacks.py) sees a traceback one line at a time and
may keep only part of its text (a 5,000-frame recursion is cut in the
middle), so classification works on three things gathered while the lines
pass: the exception lines of the whole chain, the frames, and *markers*
(telling substrings noticed on any line, cut or not). The chain matters:
``RuntimeError: CUDA error`` re-raised as ``ValueError`` is still a CUDA
error, and torch elastic's ``ChildFailedError`` is as fatal as its root
cause says.

The signature must say "the same crash" across ranks and across relaunches,
so it holds nothing a relaunch changes: no log line numbers, pids, addresses,
ranks, sizes or timestamps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..events import Frame

# Substrings that decide a kind wherever they appear in a crash's text. Each
# key is a marker name; checked with ``in`` on every line of an open crash.
MARKERS: tuple[tuple[str, str], ...] = (
    ("fx_nested", "Detected that you are using FX to symbolically trace a dynamo-optimized function"),
    ("fx_not_submodule", "module is not installed as a submodule"),
    # Hugging Face's HFTracer (transformers/utils/fx.py) spells it with a capital M.
    ("fx_not_submodule", "Module is not installed as a submodule"),
    ("fx_unexpected_key", "Unexpected key"),
    ("cuda_oom", "CUDA out of memory"),
    ("cuda_oom", "HIP out of memory"),
    ("nccl_timeout", "Watchdog caught collective operation timeout"),
    # Collective timeouts of the other backends and of the c10d store
    # (torch 2.13's own words). The first two name a rank that did not
    # join; the others count only in a torch.distributed context
    # (``collective_timeout`` below).
    ("monitored_barrier", "failed to pass monitoredBarrier"),
    ("store_clients", "clients joined"),
    ("timed_out", "Timed out waiting"),
    ("timed_out", "timed out"),
    ("timed_out", "wait timeout after"),
    ("timed_out", "Socket Timeout"),
    ("gloo", "gloo/"),
    ("gloo", "ProcessGroupGloo"),
    ("process_group", "ProcessGroup"),
    ("cuda_error", "CUDA error:"),
    ("cuda_error", "AcceleratorError"),
    ("cuda_error", "CUBLAS_STATUS_"),
    ("cuda_error", "CUDNN_STATUS_"),
    ("illegal_memory_access", "illegal memory access"),
    ("device_side_assert", "device-side assert triggered"),
    ("invalid_device_ordinal", "invalid device ordinal"),
    ("missing_module", "No module named"),
    ("disk_full", "No space left on device"),
    ("disk_full", "Not enough disk space"),
    ("disk_full", "[Errno 28]"),
    ("sigkill", "Signal 9 (SIGKILL)"),
    ("sigterm", "Signal 15 (SIGTERM)"),
    ("nccl_error", "NCCL error"),
    ("host_oom", "DefaultCPUAllocator: can't allocate memory"),
    ("host_oom", "Out of memory: Killed process"),
    # A collective failed because another rank died: a consequence, never
    # the root cause of an incident (detectors/crash.py merges it).
    ("peer_failure", "Connection closed by peer"),
    ("peer_failure", "Connection reset by peer"),
    ("peer_failure", "remote process exited or there was a network error"),
    ("peer_failure", "NCCL communicator was aborted"),
    ("peer_failure", "typically caused by a remote worker crashing"),
)

# Causes of crashes that follow from another rank's failure: the incident's
# root cause is elsewhere (detectors/crash.py). ``child_failed`` is torch
# elastic's report, ``peer_failure`` a collective whose peer died,
# ``terminate`` C++'s std::terminate after an NCCL abort, ``torchrun_stopping``
# the agent's SIGTERM to the surviving siblings, ``child_exit`` its
# ``failed (exitcode: N)`` line.
COLLATERAL_CAUSES = frozenset({"child_failed", "peer_failure", "terminate", "torchrun_stopping", "child_exit"})
# Of those, the ones that say nothing by themselves: they join an incident
# but never make an alert of their own.
WEAK_CAUSES = frozenset({"torchrun_stopping", "child_exit"})

# Exit codes (negative: the signal that ended the process) of a crash in
# native code, and their cause names.
SIGNAL_CAUSES = {-11: "sigsegv", -6: "sigabrt", -7: "sigbus", -8: "sigfpe", -4: "sigill"}
SIGNAL_NAMES = {"SIGSEGV": "sigsegv", "SIGABRT": "sigabrt", "SIGBUS": "sigbus", "SIGFPE": "sigfpe", "SIGILL": "sigill"}

# torch.distributed's own error types (torch/distributed/__init__.py): a
# timeout inside one of them is a collective's or the store's.
_DIST_TYPES = frozenset({"DistError", "DistBackendError", "DistStoreError", "DistNetworkError"})
_DIST_FILES = ("distributed_c10d.py", "c10d_logger.py", "torch/distributed/rendezvous.py")

# torchrun's agent raises SignalException when a signal reaches it: its
# number says whose hand it was.
_AGENT_SIGNALS = {
    15: ("killed", "sigterm"), 9: ("killed", "sigkill"), 1: ("killed", "sighup"), 3: ("killed", "sigquit"),
    # Ctrl-C at the terminal: the user's own hand, as a KeyboardInterrupt.
    2: ("exception", "keyboard_interrupt"),
}
_GOT_SIGNAL = re.compile(r"got signal: (\d+)")

# Exception class names (last dotted component) that make a compile error.
_COMPILE_TYPES = frozenset({
    "BackendCompilerFailed", "InductorError", "FailOnRecompileLimitHit",
    "RecompileLimitExceeded", "CacheLimitExceeded", "Unsupported",
    "TorchRuntimeError", "InternalTorchDynamoError", "LoweringException",
})
_COMPILE_MODULES = ("torch._dynamo.exc.", "torch._inductor.exc.")

# Frames of torch.fx's symbolic tracer that a foreign thread lands in when
# the process-global ``nn.Module.__call__`` patch catches its module calls.
_FX_TRACER_FILES = ("_symbolic_trace.py", "transformers/utils/fx.py")
_FX_TRACER_FUNCS = frozenset({"module_call_wrapper", "call_module", "path_of_module", "module_getattr_wrapper"})

_DIGITS = re.compile(r"\d+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_SPACE = re.compile(r"\s+")


def scan_markers(line: str) -> frozenset[str]:
    """The marker names present in one line (cheap: plain substring tests)."""
    found = {name for name, needle in MARKERS if needle in line}
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class ExcLine:
    """One ``Type: message`` line of a (possibly chained) traceback."""

    exc_type: str
    message: str


@dataclass(frozen=True, slots=True)
class ChildReport:
    """What torch elastic's ``ChildFailedError`` report says about the root cause."""

    script: str | None = None
    root_rank: int | None = None
    root_local_rank: int | None = None
    root_exitcode: int | None = None
    root_pid: int | None = None
    root_traceback: str | None = None
    failed_ranks: tuple[int, ...] = ()
    # Failed ranks with exit code -15: the siblings torch elastic stopped
    # itself after the root cause, not a signal from outside.
    stopped_ranks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Classification:
    detector: str
    kind: str
    cause: str | None


def short_type(exc_type: str) -> str:
    """``torch.cuda.OutOfMemoryError`` -> ``OutOfMemoryError``: versions move classes."""
    return exc_type.rsplit(".", 1)[-1].strip()


def fx_tracing_cause(chain: tuple[ExcLine, ...], frames: tuple[Frame, ...], markers: frozenset[str]) -> str | None:
    """FX symbolic tracing collided with torch.compile (any torch >= 2.5).

    Returns the form (``nested_fx_trace``, ``foreign_module_call``,
    ``module_stack_corrupted``) or None. Older torch raises the explicit "Detected that you are using FX..."
    RuntimeError. Where the tracing flag became thread-local but the
    ``nn.Module.__call__`` patch did not, another thread's module call is
    routed into the tracer and dies there with a NameError or an
    AssertionError about the module stack; only the tracer's frames tell
    those apart from an ordinary NameError.
    """
    if "fx_nested" in markers:
        return "nested_fx_trace"
    if not ("fx_not_submodule" in markers or "fx_unexpected_key" in markers):
        return None
    in_tracer = any(
        f.file.replace("\\", "/").endswith(_FX_TRACER_FILES) and f.function in _FX_TRACER_FUNCS for f in frames
    )
    if not in_tracer:
        return None
    for exc in chain:
        name = short_type(exc.exc_type)
        if name == "NameError" and "not installed as a submodule" in exc.message.lower():
            return "foreign_module_call"
        if name == "AssertionError" and "Unexpected key" in exc.message:
            return "module_stack_corrupted"
    return None


def classify(
    chain: tuple[ExcLine, ...],
    frames: tuple[Frame, ...],
    markers: frozenset[str],
    report: ChildReport | None = None,
) -> Classification:
    """Decide detector, kind and cause (CONTRACTS section 4).

    Order matters where a chain carries several signs: the most specific,
    most actionable cause wins (an OOM inside an Inductor compile is an OOM).
    """
    names = {short_type(e.exc_type) for e in chain}
    full_types = [e.exc_type for e in chain]
    fx_cause = fx_tracing_cause(chain, frames, markers)
    if fx_cause is not None:
        return Classification("fx_tracing", "fx_tracing", fx_cause)
    if report is not None:
        return _classify_child(report)
    if "OutOfMemoryError" in names or "cuda_oom" in markers:
        return Classification("crash", "cuda_oom", None)
    # MemoryError, and numpy's _ArrayMemoryError (a subclass of it).
    if any(n.endswith("MemoryError") for n in names) or "host_oom" in markers:
        return Classification("crash", "host_oom", None)
    if "nccl_timeout" in markers:
        return Classification("crash", "nccl_timeout", None)
    timeout = collective_timeout(names, frames, markers)
    if timeout is not None:
        return Classification("crash", "nccl_timeout", timeout)
    if "SignalException" in names:
        for exc in chain:
            if short_type(exc.exc_type) == "SignalException":
                by, why = agent_signal(exc.message)
                return Classification("crash", by, why)
    if "ModuleNotFoundError" in names or (
        "ImportError" in names and "missing_module" in markers
    ):
        return Classification("crash", "missing_module", None)
    if markers & {"cuda_error", "illegal_memory_access", "device_side_assert"} or "AcceleratorError" in names:
        cause: str | None = None
        for marker in ("invalid_device_ordinal", "illegal_memory_access", "device_side_assert"):
            if marker in markers:
                cause = marker
                break
        return Classification("crash", "cuda_error", cause)
    if names & _COMPILE_TYPES or any(t.startswith(_COMPILE_MODULES) for t in full_types):
        cause = "recompile_limit" if "FailOnRecompileLimitHit" in names else None
        return Classification("crash", "compile_error", cause)
    if "KeyboardInterrupt" in names:
        # The user's own Ctrl-C: a crash of the run, but not one from outside.
        return Classification("crash", "exception", "keyboard_interrupt")
    if "disk_full" in markers:
        return Classification("crash", "exception", "disk_full")
    if "peer_failure" in markers:
        return Classification("crash", "exception", "peer_failure")
    if "nccl_error" in markers:
        return Classification("crash", "exception", "nccl_error")
    return Classification("crash", "exception", None)


def collective_timeout(names: set[str], frames: tuple[Frame, ...], markers: frozenset[str]) -> str | None:
    """A collective or the c10d store timed out on a backend other than
    NCCL's watchdog (that one is the ``nccl_timeout`` marker). Returns the
    cause, or None. "Timed out" alone is anybody's (an HTTP read); it counts
    inside a torch.distributed error type, a c10d frame or gloo's text."""
    if "monitored_barrier" in markers:
        return "monitored_barrier"
    if "store_clients" in markers:
        return "store_timeout"
    if "timed_out" not in markers:
        return None
    if "gloo" in markers:
        return "gloo_timeout"
    if "DistStoreError" in names:
        return "store_timeout"
    if names & _DIST_TYPES or "process_group" in markers or any(
        f.file.replace("\\", "/").endswith(_DIST_FILES) for f in frames
    ):
        return "collective_timeout"
    return None


def agent_signal(message: str) -> tuple[str, str]:
    """(kind, cause) of torchrun's ``SignalException: Process N got signal: S``:
    a SIGTERM/SIGKILL/SIGHUP to the launcher came from outside (a person,
    the scheduler): ``killed``; a SIGINT is the user's Ctrl-C."""
    found = _GOT_SIGNAL.search(message)
    number = int(found.group(1)) if found else 15
    return _AGENT_SIGNALS.get(number, ("killed", f"signal_{number}"))


def _classify_child(report: ChildReport) -> Classification:
    """Only the Root Cause entry counts: the Failures' -15s are the agent's own
    SIGTERM to the siblings (see parsers/child_report.py)."""
    code = report.root_exitcode
    trace = report.root_traceback or ""
    if code == -9 or "Signal 9 " in trace:
        return Classification("crash", "killed", "sigkill")
    if code == -15 or "Signal 15 " in trace:
        return Classification("crash", "killed", "sigterm")
    cause = SIGNAL_CAUSES.get(code) if code is not None else None
    if cause is None:
        named = re.search(r"\((SIG[A-Z]+)\)", trace)
        cause = SIGNAL_NAMES.get(named.group(1)) if named else None
    if cause is not None:
        return Classification("crash", "segfault", cause)
    return Classification("crash", "exception", "child_failed")


def normalise(text: str, limit: int = 120) -> str:
    """Digits and addresses out, whitespace folded: what stays across relaunches."""
    text = _HEX.sub("#", text)
    text = _DIGITS.sub("#", text)
    text = _SPACE.sub(" ", text).strip()
    return text[:limit]


# Inductor's generated modules are named by a content hash
# (``citgu5z5erg4...py``); the same graph gets the same hash, but a one-token
# change in the model renames it, which must not make a relaunch's OOM new.
_GENERATED = re.compile(r"^[a-z0-9]{24,}\.py$")


def _basename(path: str) -> str:
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    return "<generated>.py" if _GENERATED.match(base) else base


def traceback_signature(
    exc_type: str, message: str, frames: Iterable[Frame], report: ChildReport | None = None
) -> str:
    """``ExcName @ inner.py:func < caller.py:func < ...`` (innermost three frames).

    Frames carry no line numbers: an edit above the failing line must not
    make a relaunch's crash look new. Without frames the normalised message
    stands in.
    """
    name = short_type(exc_type) or "UnknownError"
    if report is not None and report.root_exitcode is not None:
        name = f"{name}(exitcode={report.root_exitcode})"
    inner = list(frames)[-3:]
    if inner:
        path = " < ".join(f"{_basename(f.file)}:{f.function}" for f in reversed(inner))
        return f"{name} @ {path}"
    if message and report is None:
        return f"{name}: {normalise(message, 80)}"
    return name


def signal_signature(kind: str, cause: str | None, text: str) -> str:
    """For one-line fatal signals (watchdog, slurmstepd): kind plus the normalised line."""
    head = f"{kind}/{cause}" if cause else kind
    return f"{head}: {normalise(text, 100)}"
