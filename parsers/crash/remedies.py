"""What a crash alert should tell the person reading it: cause and remedies.

An alert that says "RuntimeError" sends someone to search the web at 3 am;
one that says why this happens and what is known to fix it saves the night.
The texts are keyed by the classification of parsers/signatures.py
(detector, kind, cause) and stay short: a few lines for a TUI panel or a
chat message.
"""

from __future__ import annotations

FX_TRACING = (
    "FX symbolic tracing ran while torch.compile'd code was running. "
    "torch.fx.symbolic_trace patches torch.nn.Module.__call__ (and __getattr__) for the whole process, "
    "not only for the tracing thread, and before torch 2.14 its 'is tracing' flag is process-global too. "
    "So when one thread traces (e.g. a drafter being FX-traced) while another thread runs a compiled "
    "function (e.g. flex_attention in the target model), the compiled thread either sees the flag and "
    "raises 'Detected that you are using FX to symbolically trace a dynamo-optimized function', or its "
    "module calls are routed into the other thread's tracer and fail with 'module is not installed as a "
    "submodule' / 'Unexpected key' (seen on torch 2.13 too, and the only form left from torch 2.14, "
    "where the flag became thread-local but the patch did not).\n"
    "Remedies:\n"
    "- Do not FX-trace while compiled code runs concurrently: serialise tracing and compiled calls with one "
    "lock, or trace everything before starting the compiled worker threads.\n"
    "- Trace with torch.export or make_fx (no global nn.Module patch) instead of fx.symbolic_trace in the "
    "drafter thread.\n"
    "- Run the drafter (or the tracing) in a separate process.\n"
    "- If the traced module itself calls a compiled function: wrap that call with torch.compiler.disable, or "
    "set torch._dynamo.config.error_on_nested_fx_trace=False so dynamo inlines it during tracing."
)

_KIND = {
    "cuda_oom": (
        "CUDA out of memory: the allocator could not get the block it asked for.\n"
        "Remedies: lower the per-step token budget (batch size x sequence length) or the longest bucket; "
        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when 'reserved but unallocated' memory is "
        "large (fragmentation); enable activation checkpointing; check for another process on the GPU."
    ),
    "nccl_timeout": (
        "Collective timeout (NCCL watchdog, gloo send/recv, a process group, monitored_barrier or the c10d "
        "store): a rank waited longer than the process-group timeout, almost always for another rank that "
        "hung, died, ran slower (data loading, checkpointing) or took another code path and never joined. The "
        "rank named is the one that waited, not the culprit.\n"
        "Remedies: find the rank that did not join: the one no timeout names, whose log stopped first, or that "
        "torchrun still had to stop; py-spy dump it if it is alive; check that every rank runs the same "
        "collectives in the same order; rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL (monitored_barrier names "
        "the missing rank), NCCL_DEBUG=INFO and TORCH_NCCL_TRACE_BUFFER_SIZE for the flight recorder; keep "
        "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 so the job fails fast; raise the timeout "
        "(init_process_group(timeout=...)) only for slow first collectives such as checkpoint loading."
    ),
    "missing_module": (
        "A Python module is missing from the environment the job ran in.\n"
        "Remedies: install it in that environment (the one the launcher's python uses), or activate the "
        "right virtualenv/conda env in the launch script."
    ),
    "cuda_error": (
        "CUDA error: a kernel or the driver failed; the reported stack may be asynchronous and point past "
        "the real culprit.\n"
        "Remedies: rerun with CUDA_LAUNCH_BLOCKING=1 to locate it; check index bounds for device-side "
        "asserts; for 'invalid device ordinal' check CUDA_VISIBLE_DEVICES against --nproc_per_node; for "
        "illegal memory access suspect custom kernels, compiled graphs or a failing GPU (check NVML/Xid)."
    ),
    "compile_error": (
        "torch.compile failed (dynamo tracing or the Inductor backend).\n"
        "Remedies: rerun with TORCHDYNAMO_VERBOSE=1 and TORCH_LOGS=+dynamo for the internal stack; try "
        "backend='aot_eager' to tell dynamo from Inductor problems; clear the Inductor cache "
        "(TORCHINDUCTOR_CACHE_DIR) after upgrades; set TORCHINDUCTOR_COMPILE_THREADS=1 when a compile "
        "subprocess crashed."
    ),
    "killed": (
        "The process was killed from outside (SIGKILL/SIGTERM): host OOM killer, the scheduler, or a person.\n"
        "Remedies: check dmesg/journal for the OOM killer and reduce host memory (dataloader workers, pinned "
        "memory, CPU offload); for scheduler kills check the time limit and make the job checkpoint and "
        "resume."
    ),
    "host_oom": (
        "Host (CPU) memory ran out: an allocation on the CPU failed (DefaultCPUAllocator, MemoryError) or the "
        "kernel's OOM killer ended a rank.\n"
        "Remedies: fewer dataloader workers or a smaller prefetch_factor, less pinned memory, load checkpoints "
        "with mmap=True / map_location to the GPU, shard CPU offload, check the host for other memory users "
        "(free -g, dmesg | grep -i oom)."
    ),
    "segfault": (
        "The process died in native code (segmentation fault, abort or bus error): a CUDA extension, a compiled "
        "kernel, a C++ exception in a background thread, or a driver problem; Python printed no traceback.\n"
        "Remedies: run with PYTHONFAULTHANDLER=1 (or python -X faulthandler) to get the Python stack of the "
        "crash; rerun with CUDA_LAUNCH_BLOCKING=1; suspect recently changed extensions (flash-attn, apex, "
        "custom ops) built against another torch; a SIGBUS often means /dev/shm is too small (docker --shm-size)."
    ),
    "exception": (
        "The training script raised an exception.\n"
        "Remedies: read the last exception and the innermost frames; fix and relaunch from the last checkpoint."
    ),
}

_CAUSE = {
    "recompile_limit": (
        "torch.compile hit its recompile limit with fullgraph=True (FailOnRecompileLimitHit): a guard keeps "
        "failing, usually a Python scalar or a changing shape baked into the graph.\n"
        "Remedies: see the 'last reason' guard in the recompile warning; pass changing scalars as tensors, "
        "mark dynamic dimensions (torch._dynamo.mark_dynamic) or compile with dynamic=True; raise "
        "torch._dynamo.config.recompile_limit (cache_size_limit before torch 2.6) only if the variants are "
        "few and intended."
    ),
    "slurm_time_limit": (
        "SLURM stopped the job at its time limit.\n"
        "Remedies: request more time (--time) or checkpoint often enough and resubmit with resume; use "
        "--signal=USR1@120 to get a warning before the kill."
    ),
    "slurm_cancelled": (
        "The SLURM job was cancelled (scancel, an admin, or a dependency).\n"
        "Remedies: check sacct -j JOBID for who and why; resubmit from the last checkpoint."
    ),
    "slurm_preempted": "SLURM preempted the job. Remedies: resubmit with requeue and resume from the last checkpoint.",
    "oom_killer": (
        "The kernel's OOM killer killed the process: host (CPU) memory ran out, not GPU memory.\n"
        "Remedies: fewer dataloader workers or smaller prefetch, less pinned memory or CPU offload, check "
        "for a host-side leak."
    ),
    "sigkill": (
        "The process got SIGKILL (signal 9), most often from the host OOM killer, sometimes a scheduler or a "
        "person.\nRemedies: check dmesg for 'Out of memory: Killed process'; reduce host memory use."
    ),
    "disk_full": (
        "The disk is full (no space left / not enough disk space).\n"
        "Remedies: free space or point HF_HOME / HF_DATASETS_CACHE / checkpoint dirs at a larger volume; "
        "keep fewer checkpoints (save_total_limit)."
    ),
    "keyboard_interrupt": (
        "Interrupted by the user (Ctrl-C, KeyboardInterrupt). Nothing to fix unless it was not you."
    ),
    "child_failed": (
        "torch elastic reports a failed worker (ChildFailedError); the real error is in that rank's own "
        "traceback above the report (see 'Root Cause': rank and exitcode).\n"
        "Remedies: fix the root-cause rank's error; set TORCHELASTIC_ERROR_FILE / use @record to get its "
        "traceback into the report."
    ),
    "invalid_device_ordinal": (
        "A rank asked for a GPU index that does not exist: more processes per node than visible GPUs.\n"
        "Remedies: match --nproc_per_node to the number of GPUs in CUDA_VISIBLE_DEVICES."
    ),
    "sigabrt": (
        "The process aborted (SIGABRT): usually C++'s std::terminate after an uncaught exception, e.g. NCCL's "
        "watchdog tearing the process down after a collective failed or timed out.\n"
        "Remedies: look for the error just before 'terminate called after throwing' (often a watchdog timeout "
        "on another rank); run with PYTHONFAULTHANDLER=1 for the Python stack."
    ),
    "peer_failure": (
        "A collective failed because another rank went away (connection closed by peer): a consequence, the "
        "root cause is that other rank's own error.\n"
        "Remedies: find the first rank that failed (torch elastic's 'Root Cause' entry) and fix its error."
    ),
    "nccl_error": (
        "An NCCL collective failed.\nRemedies: rerun with NCCL_DEBUG=INFO; check that every rank runs the same "
        "collectives in the same order and that the network/IB devices are healthy."
    ),
}


def remedy(detector: str, kind: str | None, cause: str | None) -> str:
    """The explanation for one alert: the cause's text if known, else the kind's.

    Never empty: an unknown class still gets the generic exception advice.
    """
    if detector == "fx_tracing":
        return FX_TRACING
    if cause is not None and cause in _CAUSE:
        return _CAUSE[cause]
    if kind is not None and kind in _KIND:
        return _KIND[kind]
    return _KIND["exception"]
