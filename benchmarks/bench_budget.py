"""Where issue 20's time goes: the parse of progress lines, of the others, and the detectors.

The 1M lines/s target leaves a log of N lines N us in all. This splits one
speed_logs shape (``benchmarks/speed_logs.py``) into what each part costs,
measured in one process, in alternating rounds (CPU time, medians):

* the parse of the log without its progress lines (the same file, its
  lines holding ``tok/s`` or ``Ktok/s`` removed): the cost of every other
  line, the reference;
* the parse of the whole log (``replay.log_batches`` drained): less the
  above, the cost of the progress lines;
* ``replay.replay`` of the whole log: less the parse, the detectors and the
  Monitor.

It prints each per line or per step, and what the target leaves per
progress line for the parse, the detectors and the Monitor together, once
the other lines are read. A compiled part that does not bring the sum of
those under that is not enough on its own.

``--kinds`` splits the progress lines further, by difference: for each
kind, the log without its lines, parsed and replayed in the same rounds;
what it saves, per line of the kind, in the parse and in the rest:

* ``step`` -- stamped step lines with Ktok/s (a lane of stamped lines),
* ``bar`` -- tqdm bars without a stamp between stamped lines (a ``Bare``
  lane: each dated by the line before it),
* ``redrawn`` -- bars redrawn in place with '\\r' (each read on its own).

A kind's figure includes what its lines do to the others' reading (a bar
between two step lines cuts their stretch in two; without step lines the
detectors have no throughput to judge).

    python benchmarks/bench_budget.py [--shape progress] [--lines 600000] [--rounds 3] [--kinds]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speed_logs import write_log  # noqa: E402

from dflash_watch.gc_policy import bulk_read  # noqa: E402
from dflash_watch.replay import log_batches, replay  # noqa: E402

TARGET_LINES_PER_S = 1_000_000


def _progress(line: bytes) -> bool:
    return b"tok/s" in line  # speed_logs' step lines (Ktok/s) and bars (tok/s=)


# Kinds of progress lines (``--kinds``), told apart in speed_logs' shapes.
KINDS = {
    "step": lambda line: b"Ktok/s" in line,
    "bar": lambda line: b"it/s" in line and b"\r" not in line and b"Ktok/s" not in line,
    "redrawn": lambda line: b"\r" in line,
}


def _without(src: Path, dst: Path, drop: Callable[[bytes], bool]) -> int:
    """``src`` without the lines ``drop`` picks (bytes, split at '\\n' only:
    a bar redrawn with '\\r' is one line); how many it left out."""
    dropped = 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for line in fin:
            if drop(line):
                dropped += 1
            else:
                fout.write(line)
    return dropped


def parse_cpu(path: Path) -> tuple[float, int]:
    """CPU seconds to drain ``log_batches`` of ``path``, and its events."""
    start = time.process_time()
    with bulk_read():
        events = sum(len(batch) for batch in log_batches(str(path)))
    return time.process_time() - start, events


def replay_cpu(path: Path) -> float:
    start = time.process_time()
    replay([str(path)])
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="progress", choices=("quiet", "progress", "ranks", "degraded", "nan"))
    ap.add_argument("--lines", type=int, default=600_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", action="store_true", help="split the progress lines by kind (step, bar, redrawn)")
    args = ap.parse_args(argv)
    kinds: dict[str, tuple[int, list[float], list[float]]] = {}  # kind -> (its lines, parse s, replay s without it)
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / f"{args.shape}.log"
        n_lines = write_log(whole, args.lines, args.shape)
        other = Path(tmp) / f"{args.shape}-other.log"
        n_progress = _without(whole, other, _progress)
        n_other = n_lines - n_progress
        if args.kinds:
            for kind, drop in KINDS.items():
                n = _without(whole, Path(tmp) / f"{args.shape}-{kind}.log", drop)
                if n:
                    kinds[kind] = (n, [], [])
        other_s: list[float] = []
        parse_s: list[float] = []
        replay_s: list[float] = []
        steps = 0
        for _ in range(args.rounds):
            other_s.append(parse_cpu(other)[0])
            seconds, steps = parse_cpu(whole)
            parse_s.append(seconds)
            replay_s.append(replay_cpu(whole))
            for kind, (_n, kind_parse, kind_replay) in kinds.items():
                path = Path(tmp) / f"{args.shape}-{kind}.log"
                kind_parse.append(parse_cpu(path)[0])
                kind_replay.append(replay_cpu(path))
    o, p, r = (statistics.median(x) for x in (other_s, parse_s, replay_s))
    per_other = o / max(n_other, 1) * 1e6
    per_progress = max(p - o, 0.0) / max(n_progress, 1) * 1e6
    per_step = max(r - p, 0.0) / max(steps, 1) * 1e6
    budget = (n_lines / TARGET_LINES_PER_S - o) / max(n_progress, 1) * 1e6
    print(f"{args.shape}: {n_lines:,} lines, {n_progress:,} progress, {steps:,} events; "
          f"CPU medians of {args.rounds} rounds")
    print(f"  parse, other lines only   {o:6.2f} s   {per_other:5.2f} us per other line (the reference)")
    print(f"  parse, whole log          {p:6.2f} s   {per_progress:5.2f} us per progress line "
          f"({per_progress / max(per_other, 1e-9):.0f}x an other line)")
    print(f"  replay, whole log         {r:6.2f} s   {per_step:5.2f} us per event for the detectors and the Monitor")
    spent = per_progress + per_step
    if budget > 0:
        print(f"  at {TARGET_LINES_PER_S:,} lines/s the other lines leave {budget:5.2f} us per progress line; "
              f"spent: {spent:5.2f} us ({spent / budget:.1f}x the budget)")
    else:  # a short log: start-up alone passes the target
        print(f"  at {TARGET_LINES_PER_S:,} lines/s the other lines leave nothing; spent: {spent:5.2f} us")
    print(f"  lines/s now: {n_lines / r:,.0f}")
    if args.kinds:
        print("  by kind, by difference (the log without its lines):")
        print(f"  {'kind':>9} {'lines':>9} {'parse us':>9} {'rest us':>8} {'us/line':>8} {'of replay':>9}")
        for kind, (n, kind_parse, kind_replay) in kinds.items():
            kp, kr = statistics.median(kind_parse), statistics.median(kind_replay)
            parse_us = (p - kp) / n * 1e6
            rest_us = ((r - kr) - (p - kp)) / n * 1e6
            print(f"  {kind:>9} {n:>9,} {parse_us:>9.2f} {rest_us:>8.2f} {parse_us + rest_us:>8.2f} "
                  f"{(r - kr) / r:>9.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
