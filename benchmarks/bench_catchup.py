"""Catch-up of the live path against replay on the same long log.

Attaching `watch`/`headless` to a job whose log already holds days of
lines first reads all of it. That catch-up must be at least as fast as
`replay` (issue 10) and give the alerts replay gives. In one process, on
one log written by ``bench_replay.write_log``, this times:

* ``replay()`` with the Monitor replay uses (the reference),
* a ``LiveSession`` on the complete file: from start until the Monitor
  has read every line (the tailer, its chunks, the Monitor's live feed),

and prints lines/s of each, the ratio, and whether the alerts agree
(detector, kind, gpu, state).

    python benchmarks/bench_catchup.py [--lines 600000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_replay import write_log  # noqa: E402


def _keys(alerts) -> list[tuple]:  # noqa: ANN001
    return [(a.detector, a.kind, a.gpu, a.state) for a in alerts]


def time_replay(path: Path) -> tuple[float, list]:
    from dflash_watch.monitor import Monitor
    from dflash_watch.replay import replay

    start = time.perf_counter()
    result = replay([str(path)], monitor=Monitor(keep_lines=0, keep_history=False))
    return time.perf_counter() - start, result.alerts


def time_live(path: Path, lines: int, *, view: bool) -> tuple[float, list]:
    """``view``: the dashboard's Monitor (recent lines and charts' history
    kept); else headless's (alerts only)."""
    from dflash_watch.live import LiveSession
    from dflash_watch.monitor import Monitor

    monitor = Monitor() if view else Monitor(keep_lines=0, keep_history=False)
    got: list = []
    monitor.subscribe(got.append)
    # The data's clock stands still at the data (speed 0): the comparison
    # is of what was read, not of the silence a wall clock adds after it.
    session = LiveSession(monitor, logs=(str(path),), use_nvml=False, clock=None, speed=0.0)
    start = time.perf_counter()
    with session:
        while True:
            state = monitor._streams.get(str(path))
            if state is not None and state.lines >= lines:
                break
            time.sleep(0.005)
        elapsed = time.perf_counter() - start
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not monitor_quiet(monitor):
            time.sleep(0.05)
    monitor.finish()
    return elapsed, got


def monitor_quiet(monitor) -> bool:  # noqa: ANN001
    return monitor.detectors.deadline() is None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=600_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dfw-catchup-"))
    try:
        log = tmp / "train.log"
        lines = write_log(log, args.lines)
        # Rounds alternate the three readings, so that the machine's drift
        # (other jobs, CPU frequency) falls on all of them alike; medians.
        times: dict[str, list[float]] = {"replay": [], "headless": [], "watch": []}
        agree = True
        counts = ""
        for _ in range(args.rounds):
            r_s, r_alerts = time_replay(log)
            times["replay"].append(r_s)
            for name, view in (("headless", False), ("watch", True)):
                l_s, l_alerts = time_live(log, lines, view=view)
                times[name].append(l_s)
                agree = agree and _keys(r_alerts) == _keys(l_alerts)
                counts = f"{len(l_alerts)} vs {len(r_alerts)}"
        base = statistics.median(times["replay"])
        # The fastest round too: on a shared machine the other jobs only
        # ever add time, so the minimum is the steadiest reading of the code.
        best = min(times["replay"])
        print(f"{'path':>10} {'lines':>9} {'median s':>9} {'lines/s':>10} {'/replay':>8} {'min s':>6} {'/replay':>8}  runs")
        for name, values in times.items():
            med, low = statistics.median(values), min(values)
            runs = " ".join(f"{v:.2f}" for v in values)
            print(f"{name:>10} {lines:>9} {med:>9.2f} {lines / med:>10,.0f} {med / base:>8.2f} {low:>6.2f} {low / best:>8.2f}  {runs}")
        print(f"alerts agree with replay in every round: {agree} ({counts})")
        print("target: live catch-up within 1.0x replay's time; watch also keeps the charts' history")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
