"""The demo's first launch read at once: for screenshots and tests of `d`.

The real pieces of `dflash-watch demo` without its clock: the staged
environments and baseline (``staging``), the simulator's log, GPU samples
and probe lines written at once (``--fast``), and replay reading them into
a Monitor judged by the staged baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import Monitor

# Simulated seconds of the first launch: through the broken-batching phase
# to the FX-tracing crash.
THROUGH_CRASH_S = 1500.0
START = 1_796_000_000.0


@dataclass(slots=True)
class DemoSnapshot:
    monitor: Monitor
    now: float | None  # the last replayed event's time; None only if the replay saw none
    fingerprint: Callable[[], dict[str, Any] | None]
    baseline_path: str


def replayed_demo(out: Path, seconds: float = THROUGH_CRASH_S, seed: int = 7, tz: Any = None) -> DemoSnapshot:
    from ..baseline.store import load_baseline
    from ..monitor import Monitor
    from ..replay import replay
    from . import simulator
    from .staging import rebuilt_fingerprint, stage

    staged = stage(out)
    simulator.main(["--out", str(out), "--fast", "--quiet", "--seed", str(seed), "--start-time", str(START),
                    "--max-sim-seconds", str(seconds)])
    monitor = Monitor(tz=tz, baseline=load_baseline(staged.baseline))
    monitor.fingerprint = fingerprint = rebuilt_fingerprint(staged)
    replay([str(out / simulator.LOG_NAME)], gpu_samples=[str(out / simulator.GPU_NAME)],
           probes=[str(out / simulator.PROBE_NAME)], monitor=monitor, tz=tz)
    return DemoSnapshot(monitor, monitor.last_event_time, lambda: fingerprint, str(staged.baseline))
