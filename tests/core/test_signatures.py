"""Classification, signatures and remedy texts (parsers/signatures.py, parsers/remedies.py)."""

from __future__ import annotations

import pytest

from dflash_watch.parsers.crash.remedies import FX_TRACING, remedy
from dflash_watch.parsers.crash.signatures import (
    ChildReport,
    ExcLine,
    classify,
    normalise,
    scan_markers,
    signal_signature,
    traceback_signature,
)
from dflash_watch.parsers.events import Frame

TRACER = (
    Frame("/venv/torch/fx/_symbolic_trace.py", 888, "module_call_wrapper"),
    Frame("/venv/torch/fx/_symbolic_trace.py", 562, "call_module"),
)


def verdict(exc_type: str, message: str, frames: tuple[Frame, ...] = (), extra: str = "", report=None):
    chain = (ExcLine(exc_type, message),)
    markers = scan_markers(f"{exc_type}: {message}") | scan_markers(extra)
    result = classify(chain, frames, markers, report)
    return result.detector, result.kind, result.cause


@pytest.mark.parametrize(
    ("exc_type", "message", "expected"),
    [
        ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2 GiB", ("crash", "cuda_oom", None)),
        ("torch.cuda.OutOfMemoryError", "CUDA out of memory.", ("crash", "cuda_oom", None)),
        ("RuntimeError", "CUDA out of memory. Tried to allocate 20.00 MiB", ("crash", "cuda_oom", None)),
        ("ModuleNotFoundError", "No module named 'datasets'", ("crash", "missing_module", None)),
        ("ImportError", "No module named 'x.y'", ("crash", "missing_module", None)),
        ("ImportError", "cannot import name 'foo' from 'bar'", ("crash", "exception", None)),
        ("RuntimeError", "CUDA error: an illegal memory access was encountered",
         ("crash", "cuda_error", "illegal_memory_access")),
        ("RuntimeError", "CUDA error: device-side assert triggered", ("crash", "cuda_error", "device_side_assert")),
        ("torch.AcceleratorError", "CUDA error: invalid device ordinal", ("crash", "cuda_error", "invalid_device_ordinal")),
        ("torch._dynamo.exc.BackendCompilerFailed", "backend='inductor' raised: AssertionError",
         ("crash", "compile_error", None)),
        ("torch._inductor.exc.InductorError", "RuntimeError: subprocess died", ("crash", "compile_error", None)),
        ("torch._dynamo.exc.FailOnRecompileLimitHit", "recompile_limit reached with fullgraph=True",
         ("crash", "compile_error", "recompile_limit")),
        ("KeyboardInterrupt", "", ("crash", "exception", "keyboard_interrupt")),
        ("OSError", "[Errno 28] No space left on device", ("crash", "exception", "disk_full")),
        ("OSError", "Not enough disk space. Needed: 45 MiB", ("crash", "exception", "disk_full")),
        ("torch.distributed.DistBackendError", "NCCL error in: ProcessGroupNCCL.cpp:1", ("crash", "exception", "nccl_error")),
        ("torch.distributed.DistBackendError",
         "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(...)", ("crash", "nccl_timeout", None)),
        ("ValueError", "bad shape", ("crash", "exception", None)),
        ("RuntimeError", "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
         "you tried to allocate 70368744177664 bytes.", ("crash", "host_oom", None)),
        ("MemoryError", "", ("crash", "host_oom", None)),
        ("numpy._core._exceptions._ArrayMemoryError", "Unable to allocate 256. TiB", ("crash", "host_oom", None)),
        ("RuntimeError", "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
         "[127.0.0.1]:63710", ("crash", "exception", "peer_failure")),
        ("torch.distributed.DistBackendError", "NCCL error in: ProcessGroupNCCL.cpp:3356, remote process exited or "
         "there was a network error", ("crash", "exception", "peer_failure")),
        ("RuntimeError", "Detected that you are using FX to symbolically trace a dynamo-optimized function. "
         "This is not supported at the moment.", ("fx_tracing", "fx_tracing", "nested_fx_trace")),
    ],
)
def test_classify(exc_type: str, message: str, expected: tuple) -> None:
    assert verdict(exc_type, message) == expected


def test_fx_collision_forms_need_the_tracer_frames() -> None:
    assert verdict("NameError", "module is not installed as a submodule", TRACER) == (
        "fx_tracing", "fx_tracing", "foreign_module_call")
    assert verdict("AssertionError", "Unexpected key layers.1, expected layers.0", TRACER) == (
        "fx_tracing", "fx_tracing", "module_stack_corrupted")
    assert verdict("NameError", "module is not installed as a submodule")[0] == "crash"
    assert verdict("AssertionError", "Unexpected key foo in state dict", (Frame("/w/load.py", 3, "load"),))[0] == "crash"


def test_chain_decides_over_last_exception() -> None:
    chain = (ExcLine("RuntimeError", "CUDA error: an illegal memory access was encountered"),
             ExcLine("ValueError", "step failed"))
    markers = scan_markers(chain[0].message)
    assert classify(chain, (), markers).kind == "cuda_error"


def test_child_failed_report_kinds() -> None:
    assert verdict("ChildFailedError", "", report=ChildReport(root_exitcode=-9)) == ("crash", "killed", "sigkill")
    assert verdict("ChildFailedError", "", report=ChildReport(root_exitcode=-15)) == ("crash", "killed", "sigterm")
    assert verdict("ChildFailedError", "", report=ChildReport(
        root_exitcode=1, root_traceback="Signal 9 (SIGKILL) received by PID 3")) == ("crash", "killed", "sigkill")
    assert verdict("ChildFailedError", "", report=ChildReport(root_exitcode=1)) == ("crash", "exception", "child_failed")


def test_traceback_signature_is_innermost_three_frames_without_line_numbers() -> None:
    frames = (
        Frame("/a/train.py", 10, "<module>"),
        Frame("/a/train.py", 20, "main"),
        Frame("/venv/x/module.py", 1750, "_call_impl"),
        Frame("/a/model.py", 33, "forward"),
    )
    moved = tuple(Frame(f.file.replace("/a/", "/b/"), f.line + 7, f.function) for f in frames)
    sig = traceback_signature("torch.OutOfMemoryError", "CUDA out of memory. Tried 2 GiB", frames)
    assert sig == "OutOfMemoryError @ model.py:forward < module.py:_call_impl < train.py:main"
    assert traceback_signature("torch.cuda.OutOfMemoryError", "other text", moved) == sig
    generated = (Frame("/tmp/torchinductor_root/ab/cabcdefghijklmnopqrstuvwxyz0123456.py", 9, "call"),)
    assert traceback_signature("X", "", generated) == "X @ <generated>.py:call"


def test_frameless_signatures_drop_numbers() -> None:
    assert traceback_signature("OSError", "[Errno 2] No such file: '/x/ckpt_1234'", ()) == (
        "OSError: [Errno #] No such file: '/x/ckpt_#'")
    assert traceback_signature("ChildFailedError", "", (), ChildReport(root_exitcode=-9)) == "ChildFailedError(exitcode=-9)"
    assert signal_signature("killed", "sigkill", "Killed pid 1234 at 0xdeadbeef") == "killed/sigkill: Killed pid # at #"
    assert normalise("a   b\t12  0x1f") == "a b # #"


@pytest.mark.parametrize(
    ("detector", "kind", "cause", "needle"),
    [
        ("fx_tracing", "fx_tracing", "nested_fx_trace", "torch.export or make_fx"),
        ("crash", "cuda_oom", None, "expandable_segments"),
        ("crash", "nccl_timeout", None, "NCCL_DEBUG"),
        ("crash", "nccl_timeout", None, "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
        ("crash", "compile_error", "recompile_limit", "mark_dynamic"),
        ("crash", "killed", "slurm_time_limit", "--time"),
        ("crash", "exception", "disk_full", "HF_HOME"),
        ("crash", "missing_module", None, "install"),
        ("crash", "cuda_error", None, "CUDA_LAUNCH_BLOCKING"),
        ("crash", "no_such_kind", "no_such_cause", "exception"),
        ("crash", "host_oom", None, "dataloader workers"),
        ("crash", "host_oom", "oom_killer", "OOM killer"),
        ("crash", "segfault", "sigsegv", "PYTHONFAULTHANDLER=1"),
        ("crash", "segfault", "sigbus", "/dev/shm"),
        ("crash", "segfault", "sigabrt", "terminate called after throwing"),
        ("crash", "exception", "peer_failure", "Root Cause"),
    ],
)
def test_remedies(detector: str, kind: str, cause: str | None, needle: str) -> None:
    assert needle in remedy(detector, kind, cause)


def test_fx_remedy_explains_the_process_global_patch() -> None:
    text = remedy("fx_tracing", None, None)
    assert text is FX_TRACING
    for needle in ("nn.Module.__call__", "process", "flex_attention", "lock", "separate process",
                   "symbolic_trace"):
        assert needle in text
