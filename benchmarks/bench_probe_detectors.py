"""What the issue-11 detectors (padding, alloc_thrash, recompile rate) cost replay.

Writes speed_logs' legacy shape (every progress line carries ``pad_eff 0.93``:
each one is a padding report, the worst case), then in one process, in
alternating rounds, times ``dflash_watch.replay.replay`` over it through a
Monitor with

* the reference: the detector set without the three (the recompile
  detector without its rate part), as before issue 11,
* the full set of ``build_detectors()``,

and prints the median of each and their ratio. Alternating rounds and
medians of CPU time (not wall time) keep a busy machine's noise out of
the ratio. A second part times
the detectors alone on the parsed events (no parsing), where their share
is largest.

    python benchmarks/bench_probe_detectors.py [--lines 600000] [--rounds 5]

``--per-detector progress,ranks``: instead, each detector's cost per step
line (issue 20): the events the stream makes of each speed_logs shape go
to one detector at a time (its routes, and its deadline after each event as
``DetectorSet.update`` asks it), then to the whole set; CPU microseconds
per step line, the minimum over the rounds.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speed_logs import write_log  # noqa: E402

from dflash_watch.detectors.alloc_thrash import AllocThrash  # noqa: E402
from dflash_watch.detectors.padding import PaddingDetector  # noqa: E402
from dflash_watch.detectors.recompile import RecompileDetector  # noqa: E402
from dflash_watch.detectors.registry import DetectorSet, build_detectors  # noqa: E402
from dflash_watch.monitor import Monitor  # noqa: E402
from dflash_watch.parsers.events import Event, Progress  # noqa: E402
from dflash_watch.replay import replay  # noqa: E402


class _RecompileWithoutRate(RecompileDetector):
    """The recompile detector as it was before its rate part."""

    def update(self, event):  # noqa: ANN001, ANN201
        return self._update(event)


def reference_set() -> list:
    out = []
    for d in build_detectors():
        if isinstance(d, (PaddingDetector, AllocThrash)):
            continue
        out.append(_RecompileWithoutRate(d.config) if isinstance(d, RecompileDetector) else d)
    return out


class _ReferenceMonitor(Monitor):
    def _build_detectors(self) -> DetectorSet:
        return DetectorSet(reference_set())


def time_replay(path: Path, monitor_class: type[Monitor]) -> tuple[float, int]:
    """CPU seconds of one replay (``process_time``: on a machine that other
    work shares, wall time measures the neighbours too)."""
    start = time.process_time()
    result = replay([str(path)], monitor=monitor_class(keep_lines=0, keep_history=False))
    return time.process_time() - start, len(result.alerts)


def stream_events(path: Path) -> list[Event]:
    """The events the stream makes of ``path`` (as a replay reads them, without ticks)."""
    from dflash_watch.parsers.stream import LogStream

    stream = LogStream(path.name, replay=True)
    return stream.feed(path.read_text(encoding="utf-8"), 1, 0.0) + stream.flush(0.0)


def time_detector(events: list[Event], index: int) -> float:
    """CPU seconds of detector ``index`` of a fresh set alone over ``events``."""
    d = build_detectors()[index]
    routes = d.routes()
    deadline = d.deadline if d.timed else None
    start = time.process_time()
    for e in events:
        handler = routes.get(type(e))
        if handler is not None:
            handler(e)
            if deadline is not None:
                deadline()
    return time.process_time() - start


def per_detector(shapes: str, lines: int, rounds: int, tmp: Path) -> None:
    names = [d.name for d in build_detectors()]
    for shape in shapes.split(","):
        path = tmp / f"{shape}.log"
        write_log(path, lines, shape)
        events = stream_events(path)
        steps = sum(type(e) is Progress for e in events) or 1
        best: dict[str, float] = {}
        for _ in range(rounds):
            for i, name in enumerate(names):
                best[name] = min(best.get(name, math.inf), time_detector(events, i))
            ds = DetectorSet(build_detectors())
            start = time.process_time()
            for e in events:
                ds.update(e)
            best["(whole set)"] = min(best.get("(whole set)", math.inf), time.process_time() - start)
        print(f"{shape}: {lines:,} lines, {steps:,} step lines; CPU us per step line, min of {rounds} rounds")
        for name, seconds in sorted(best.items(), key=lambda kv: -kv[1]):
            print(f"  {name:18s} {seconds / steps * 1e6:8.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=600_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-detector", metavar="SHAPES", help="each detector's cost per step line on these shapes")
    args = ap.parse_args()
    if args.per_detector:
        with tempfile.TemporaryDirectory() as tmp:
            per_detector(args.per_detector, args.lines, args.rounds, Path(tmp))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        n = write_log(path, args.lines, "legacy")
        ref, full = [], []
        alerts = {}
        for _ in range(args.rounds):
            for name, cls, out in (("reference", _ReferenceMonitor, ref), ("full", Monitor, full)):
                seconds, count = time_replay(path, cls)
                out.append(seconds)
                alerts[name] = count
        r, f = statistics.median(ref), statistics.median(full)
        print(f"replay of {n:,} lines, {args.rounds} alternating rounds, medians of CPU seconds:")
        print(f"  reference (no padding/alloc_thrash/recompile rate): {r:.3f} s "
              f"({alerts['reference']} alerts)")
        print(f"  full detector set:                                  {f:.3f} s  ({alerts['full']} alerts)")
        print(f"  ratio full / reference: {f / r:.3f}")

        # The detectors alone, on the events the stream made.
        events = stream_events(path)
        dref, dfull = [], []
        for _ in range(args.rounds):
            for make, out in ((reference_set, dref), (build_detectors, dfull)):
                ds = DetectorSet(make())
                update = ds.update
                start = time.process_time()
                for e in events:
                    update(e)
                out.append(time.process_time() - start)
        r, f = statistics.median(dref), statistics.median(dfull)
        print(f"detectors alone on {len(events):,} events: reference {r:.3f} s, full {f:.3f} s, "
              f"ratio {f / r:.3f}")


if __name__ == "__main__":
    main()
