"""Catch-up of the live path against replay and grep, on the same logs.

Attaching `watch`/`headless` to a job whose log already holds days of
lines first reads all of it. That catch-up must be at least as fast as
`replay` (issue 10), >= 1M lines/s and within 10x of ``grep -cE`` (issue
20), and give the alerts replay gives. For each shape of
``benchmarks/speed_logs.py`` (quiet and data-heavy, progress-heavy, many
ranks), on one log that replay is measured on too, this times in rounds
that interleave them:

* ``grep -cE`` over the file (a child; its CPU time),
* ``replay()`` with the Monitor replay uses (the reference),
* a ``LiveSession`` on the complete file, headless's Monitor and the
  dashboard's: from start until the Monitor has read every line,
* (``--per-event``) the headless catch-up with every fast path off,
* (``--app``) the dashboard's catch-up with its app running (Textual,
  headless, 120x40, mounted before the catch-up starts): its redraws and
  chart builds while the backlog is read count too.

and prints lines/s of each, the ratios to replay and to grep (CPU time of
this process, user + sys, so that other jobs on a shared machine do not
count; wall ratios too), the dashboard's extra over headless paired round
by round (its charts' history and log view), the process's peak RSS after
each shape, and whether the alerts agree (detector, kind, gpu, state).

    python benchmarks/bench_catchup.py [--lines 600000] [--rounds 3] [--shapes quiet,progress,ranks] [--per-event] [--app]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.speed_logs import write_log  # noqa: E402


def _keys(alerts) -> list[tuple]:  # noqa: ANN001
    return [(a.detector, a.kind, a.gpu, a.state) for a in alerts]


def time_replay(path: Path) -> tuple[float, list]:
    from dflash_watch.monitor import Monitor
    from dflash_watch.replay import replay

    start = time.process_time()
    result = replay([str(path)], monitor=Monitor(keep_lines=0, keep_history=False))
    return time.process_time() - start, result.alerts


def time_live(path: Path, lines: int, *, view: bool) -> tuple[float, list]:
    """``view``: the dashboard's Monitor (recent lines and charts' history
    kept); else headless's, as ``dflash-watch headless`` builds it (no
    lines, no charts' series; its GPU history kept for its gauges)."""
    from dflash_watch.live import LiveSession
    from dflash_watch.monitor import Monitor

    monitor = Monitor() if view else Monitor(keep_lines=0, keep_charts=False)
    got: list = []
    monitor.subscribe(got.append)
    # The data's clock stands still at the data (speed 0): the comparison
    # is of what was read, not of the silence a wall clock adds after it.
    session = LiveSession(monitor, logs=(str(path),), use_nvml=False, clock=None, speed=0.0)
    start = time.process_time()  # the tailer's thread included: CPU of the whole process
    with session:
        while True:
            state = monitor._streams.get(str(path))
            if state is not None and state.lines >= lines:
                break
            time.sleep(0.005)
        elapsed = time.process_time() - start
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not monitor_quiet(monitor):
            time.sleep(0.05)
    monitor.finish()
    return elapsed, got


def time_app(path: Path, lines: int) -> tuple[float, list]:
    """``time_live(view=True)`` with the dashboard's app running beside it."""
    import asyncio

    from dflash_watch.live import LiveSession
    from dflash_watch.monitor import Monitor
    from dflash_watch.tui.app import DashboardApp

    async def run() -> tuple[float, list]:
        monitor = Monitor(keep_lines=2000)
        got: list = []
        monitor.subscribe(got.append)
        app = DashboardApp(monitor)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.3)  # mounted and painted: its start-up is not the catch-up's
            session = LiveSession(monitor, logs=(str(path),), use_nvml=False, clock=None, speed=0.0)
            start = time.process_time()
            session.start()
            try:
                while True:
                    state = monitor._streams.get(str(path))
                    if state is not None and state.lines >= lines:
                        break
                    await asyncio.sleep(0.005)
                elapsed = time.process_time() - start
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and not monitor_quiet(monitor):
                    await asyncio.sleep(0.05)
            finally:
                session.stop()
        monitor.finish()
        return elapsed, got

    return asyncio.run(run())


def monitor_quiet(monitor) -> bool:  # noqa: ANN001
    return monitor.detectors.deadline() is None


@contextlib.contextmanager
def per_event_path():  # type: ignore[no-untyped-def]
    """Every fast path off, as tests/shell/test_fast_path_equivalence.py does
    (the stream's columns, the positional retiming, the in-order check in C,
    runs of step lines taken at once)."""
    from dflash_watch import ingest as ingest_module
    from dflash_watch.monitor import Monitor
    from dflash_watch.parsers import clock as clock_module
    from dflash_watch.parsers import step_clock as step_module
    from dflash_watch.parsers.stream import LogStream

    def plain(event, t, clocked=None):  # type: ignore[no-untyped-def]
        if clocked is None or not isinstance(event, clock_module.Progress):
            return dataclasses.replace(event, time=t)
        return dataclasses.replace(event, time=t, clocked=clocked)

    saved = (ingest_module.LogStream, clock_module.at_time, step_module.at_time, clock_module._in_order)
    ingest_module.LogStream = functools.partial(LogStream, fast=False)  # type: ignore[misc]
    clock_module.at_time = step_module.at_time = plain
    clock_module._in_order = lambda floor, events: False
    Monitor.step_runs = False
    try:
        yield
    finally:
        ingest_module.LogStream, clock_module.at_time, step_module.at_time, clock_module._in_order = saved
        del Monitor.step_runs  # the mixin's own switch again


def time_grep(path: Path) -> float:
    """CPU seconds of ``grep -cE`` over the file."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["grep", "-cE", r"tok/s|Traceback|Error", str(path)], capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=600_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default="quiet,progress,ranks")
    ap.add_argument("--per-event", action="store_true", help="also the headless catch-up with the fast paths off")
    ap.add_argument("--app", action="store_true", help="also the dashboard's catch-up with its app running (headless)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dfw-catchup-"))
    try:
        print(f"{'shape':>9} {'path':>10} {'lines':>9} {'cpu s':>7} {'lines/s':>10} {'/replay':>8} {'x grep':>7}  runs")
        for shape in args.shapes.split(","):
            log = tmp / f"{shape}.log"
            lines = write_log(log, args.lines, shape)
            # Rounds alternate the readings, so that the machine's drift
            # (other jobs, CPU frequency) falls on all of them alike; medians.
            times: dict[str, list[float]] = {"grep": [], "replay": [], "headless": [], "watch": []}
            if args.per_event:
                times["per-event"] = []
            if args.app:
                times["app"] = []
            agree = True
            counts = ""
            for _ in range(args.rounds):
                times["grep"].append(time_grep(log))
                r_s, r_alerts = time_replay(log)
                times["replay"].append(r_s)
                for name, view in (("headless", False), ("watch", True)):
                    l_s, l_alerts = time_live(log, lines, view=view)
                    times[name].append(l_s)
                    agree = agree and _keys(r_alerts) == _keys(l_alerts)
                    counts = f"{len(l_alerts)} vs {len(r_alerts)}"
                if args.per_event:
                    with per_event_path():
                        p_s, p_alerts = time_live(log, lines, view=False)
                    times["per-event"].append(p_s)
                    agree = agree and _keys(r_alerts) == _keys(p_alerts)
                if args.app:
                    a_s, a_alerts = time_app(log, lines)
                    times["app"].append(a_s)
                    agree = agree and _keys(r_alerts) == _keys(a_alerts)
            base = statistics.median(times["replay"])
            grep = statistics.median(times["grep"]) or 1e-3
            for name, values in times.items():
                med = statistics.median(values)
                runs = " ".join(f"{v:.2f}" for v in values)
                print(
                    f"{shape:>9} {name:>10} {lines:>9} {med:>7.2f} {lines / max(med, 1e-9):>10,.0f} "
                    f"{med / base:>8.2f} {med / grep:>7.1f}  {runs}"
                )
            # The dashboard's own share, paired within each round: on a
            # shared machine the rounds' spread (20% and more) is larger
            # than what keeping the charts' history and the log view costs.
            extra = [w - h for w, h in zip(times["watch"], times["headless"])]
            print(
                f"{shape:>9} watch - headless per round: median {statistics.median(extra):+.3f} s "
                f"({statistics.median(extra) / base:+.2f}x replay)  {' '.join(f'{v:+.2f}' for v in extra)}"
            )
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{shape:>9} alerts agree with replay in every round: {agree} ({counts}); peak RSS so far {rss:.0f} MB", flush=True)
        print("times: CPU seconds (user + sys) of this process (grep: of its child), medians")
        print("targets: catch-up within 1.0x replay; >= 1,000,000 lines/s; <= 10x grep")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
