"""Replay of a tqdm bar written to a file: one line, a state per step (issue 20).

HF Trainer (and any tqdm bar whose stderr goes to a file) writes its bar
as one line of '\\r'-separated states, a state per step, until the bar
closes: a 5-day run is a line of a million states. Replay reads every
state (``parsers.progress.redraws``), the states of each shape as columns
(``redraws.COLUMNS_MIN``). This writes such a log (a bar of ``--states``
states at 2.5 it/s that slows to 1.0 it/s halfway, a loss in its
postfix), and times ``dflash-watch replay --json`` on it in child
processes, in interleaved rounds (CPU time, medians):

* as it runs (the fast path),
* with every state read on its own (``COLUMNS_MIN`` out of reach: the
  reference), whose alert lines must be the same,

and prints states/s of both and the ratio.

    python benchmarks/bench_redraws.py [--states 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import time_cmd  # noqa: E402

CHILD = (
    "import sys\n"
    "if sys.argv[1] == '--one-by-one':\n"
    "    from dflash_watch.parsers.progress import redraws\n"
    "    redraws.COLUMNS_MIN = 10 ** 9\n"
    "del sys.argv[1]\n"
    "from dflash_watch.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def write_bar_log(path: Path, states: int, seed: int = 1) -> None:
    """A stamped banner, then one bar line of ``states`` states (block
    characters, an elapsed and a remaining clock, a rate, a loss), its
    rate down from 2.5 to 1.0 it/s halfway."""
    rng = random.Random(seed)
    parts = []
    elapsed = 0.0
    for i in range(1, states + 1):
        rate = 2.5 if i < states // 2 else 1.0
        elapsed += 1.0 / rate
        pct = i * 100 // states
        e, left = int(elapsed), int((states - i) / rate)
        parts.append(
            f"{pct:3d}%|{chr(0x2588) * (pct // 10):<10}| {i}/{states} "
            f"[{e // 3600:02d}:{e // 60 % 60:02d}:{e % 60:02d}<{left // 3600:02d}:{left // 60 % 60:02d}:{left % 60:02d}, "
            f" {rate - 0.02 + 0.04 * rng.random():.2f}it/s, loss={2 + rng.random():.3f}]"
        )
    with path.open("w", encoding="utf-8") as fh:
        fh.write("11/29/2026 10:00:00 - INFO - __main__ - ***** Running training *****\n")
        fh.write("\r".join(parts) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        log = Path(tmpdir) / "bar.log"
        write_bar_log(log, args.states)
        cpu: dict[str, list[float]] = {"--fast": [], "--one-by-one": []}
        alerts: dict[str, str] = {}
        for i in range(args.rounds):
            for flag in (("--fast", "--one-by-one") if i % 2 == 0 else ("--one-by-one", "--fast")):
                _wall, seconds, out, _err = time_cmd(
                    [sys.executable, "-c", CHILD, flag, "replay", "--json", "--tz", "UTC", str(log)]
                )
                cpu[flag].append(seconds)
                alerts[flag] = out
    fast, one = statistics.median(cpu["--fast"]), statistics.median(cpu["--one-by-one"])
    same = alerts["--fast"] == alerts["--one-by-one"]
    print(f"one bar line of {args.states:,} states, CPU medians of {args.rounds} rounds (start-up included)")
    print(f"  columns      {fast:6.2f} s   {args.states / fast:>9,.0f} states/s")
    print(f"  one by one   {one:6.2f} s   {args.states / one:>9,.0f} states/s")
    print(f"  x faster {one / fast:.2f}; alerts {len(alerts['--fast'].splitlines())}, the same: {same}")
    if not same:
        sys.exit("the alert lines differ")


if __name__ == "__main__":
    main()
