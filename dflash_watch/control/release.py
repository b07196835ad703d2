"""Relaunch preflight: wait for the old run to let go of its processes and GPUs, or refuse.

Why: a new training started while the old one's ranks still hold GPU memory
dies of CUDA OOM minutes later, or worse, two trainings share the GPUs.
A relaunch therefore waits (bounded) until every process of the old run is
gone and nothing the old run owned, or anything at all on the job's
configured GPUs, holds memory; then it refuses with the pids that block.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..procfs import proc_alive
from .errors import RelaunchRefused
from .state import pids_text

GpuHolders = Callable[[], "list[tuple[int, int, int, str]]"]
StepFn = Callable[[str], None]


def gpu_blockers(gpu_holders: GpuHolders | None, gpus: tuple[int, ...] | None, old: set[int],
                 step: StepFn) -> list[tuple[int, int, int, str]]:
    """(gpu, pid, used_bytes, name) rows that block a relaunch."""
    if gpu_holders is None:
        return []
    try:
        rows = list(gpu_holders())
    except Exception as exc:  # a broken GPU source must not block control
        step(f"GPU check skipped: {exc}")
        return []
    if gpus is not None:
        return [r for r in rows if r[0] in gpus]
    return [r for r in rows if r[1] in old]


def wait_released(old: set[int], gpu_holders: GpuHolders | None, gpus: tuple[int, ...] | None,
                  timeout_s: float, step: StepFn, sleep: Callable[[float], None]) -> None:
    """Return once the old run is gone; raise RelaunchRefused after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        alive = tuple(sorted(p for p in old if proc_alive(p)))
        holders = gpu_blockers(gpu_holders, gpus, old, step)
        if not alive and not holders:
            if told:
                step("old run released its processes and GPUs")
            return
        blocking = tuple(sorted(set(alive) | {pid for _, pid, _, _ in holders}))
        if time.monotonic() >= deadline:
            where = ", ".join(f"pid {pid} on GPU {gpu} ({used / 2**30:.1f} GiB, {name or '?'})"
                              for gpu, pid, used, name in holders)
            raise RelaunchRefused(
                f"refusing to relaunch: old run still holds {pids_text(blocking)}"
                + (f" [{where}]" if where else "")
                + f" after {timeout_s:g} s", blocking)
        if not told:
            step(f"waiting up to {timeout_s:g} s for {pids_text(blocking)} to exit")
            told = True
        sleep(0.2)
