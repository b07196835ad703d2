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

    python benchmarks/bench_budget.py [--shape progress] [--lines 600000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speed_logs import write_log  # noqa: E402

from dflash_watch.gc_policy import bulk_read  # noqa: E402
from dflash_watch.replay import log_batches, replay  # noqa: E402

TARGET_LINES_PER_S = 1_000_000


def _progress(line: bytes) -> bool:
    return b"tok/s" in line  # speed_logs' step lines (Ktok/s) and bars (tok/s=)


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
    ap.add_argument("--shape", default="progress", choices=("quiet", "progress", "ranks"))
    ap.add_argument("--lines", type=int, default=600_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / f"{args.shape}.log"
        n_lines = write_log(whole, args.lines, args.shape)
        other = Path(tmp) / f"{args.shape}-other.log"
        n_progress = 0
        # Bytes, split at '\n' only: a bar redrawn with '\r' is one line.
        with open(whole, "rb") as src, open(other, "wb") as dst:
            for line in src:
                if _progress(line):
                    n_progress += 1
                else:
                    dst.write(line)
        n_other = n_lines - n_progress
        other_s: list[float] = []
        parse_s: list[float] = []
        replay_s: list[float] = []
        steps = 0
        for _ in range(args.rounds):
            other_s.append(parse_cpu(other)[0])
            seconds, steps = parse_cpu(whole)
            parse_s.append(seconds)
            replay_s.append(replay_cpu(whole))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
