"""Replay of one log by two source trees, in paired, interleaved runs.

On a shared, loaded machine an absolute time says little; the ratio of two
runs taken back to back says much more. Each round runs tree A then tree B
(the order alternates) in fresh child processes, each timing only its own
``replay`` (imports excluded) in CPU seconds (``time.process_time``: other
jobs on a shared machine count far less there than in wall time), and the median of the per-round ratios is
printed along with both medians.

    python benchmarks/bench_paired.py LOG /tmp/wt-a84b389 . [--rounds 4]

Also checks that both trees give the same alerts (JSON lines) on the log.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = (
    "import json, sys, time\n"
    "from dflash_watch.replay import replay\n"
    "start = time.process_time()\n"
    "result = replay([sys.argv[1]], tz=__import__('datetime').timezone.utc)\n"
    "seconds = time.process_time() - start\n"
    "print(json.dumps({'s': seconds, 'alerts': [a.to_json() for a in result.alerts]}))\n"
)


def run_tree(tree: Path, log: str) -> tuple[float, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONUNBUFFERED", None)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, log], capture_output=True, text=True, cwd=str(tree), env=env, check=False
    )
    if proc.returncode:
        sys.exit(f"{tree}: {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["s"], out["alerts"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("a", type=Path, help="the first tree (e.g. the old commit's worktree)")
    ap.add_argument("b", type=Path, help="the second tree")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    a_s: list[float] = []
    b_s: list[float] = []
    ratios: list[float] = []
    alerts_a: list[str] = []
    alerts_b: list[str] = []
    for i in range(args.rounds):
        if i % 2 == 0:
            ta, alerts_a = run_tree(args.a.resolve(), args.log)
            tb, alerts_b = run_tree(args.b.resolve(), args.log)
        else:
            tb, alerts_b = run_tree(args.b.resolve(), args.log)
            ta, alerts_a = run_tree(args.a.resolve(), args.log)
        a_s.append(ta)
        b_s.append(tb)
        ratios.append(tb / ta)
        print(f"round {i + 1}: A {ta:.3f} s  B {tb:.3f} s  B/A {tb / ta:.2f}", flush=True)
    print(
        f"median A {statistics.median(a_s):.3f} s, B {statistics.median(b_s):.3f} s, "
        f"B/A {statistics.median(ratios):.2f} (per-round ratios {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    print(f"alerts: A {len(alerts_a)}, B {len(alerts_b)}, same: {alerts_a == alerts_b}")


if __name__ == "__main__":
    main()
