"""Crash line to alert, live: what a user feels first.

Starts a real `dflash-watch headless` on a log that holds a few healthy step
lines, then, several times, appends a traceback as the last thing in the
log (the usual crash: the log then goes quiet) and times the moment its
alert line appears on headless's stdout. Reference in the same run: the
tailer's own poll interval (0.5 s), the floor any polling watcher pays.

    python benchmarks/bench_crash_latency.py [--trials 5]

Target (issue 10): the alert within 1 s of the log going quiet.
"""

from __future__ import annotations

import argparse
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = "2026-11-29 10:{m:02d}:{s:02d},000 - INFO - train - step {n}/1000 | loss 2.31 | 21.5 Ktok/s\n"
TRACEBACK = (
    "[rank{r}]: Traceback (most recent call last):\n"
    '[rank{r}]:   File "/opt/train.py", line 412, in <module>\n'
    "[rank{r}]:     main()\n"
    '[rank{r}]:   File "/opt/trial{t}.py", line {t}, in step_{t}\n'
    "[rank{r}]:     loss.backward()\n"
    "[rank{r}]: RuntimeError: trial {t} failed\n"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dfw-latency-") as tmp:
        log = Path(tmp) / "train.log"
        log.write_text("".join(STEP.format(m=0, s=i, n=i + 1) for i in range(20)))
        proc = subprocess.Popen(
            [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=Path(__file__).resolve().parents[1],
        )
        assert proc.stdout is not None
        latencies = []
        try:
            time.sleep(2.0)
            for trial in range(args.trials):
                with open(log, "a", encoding="utf-8") as fh:
                    # Minutes apart on the log's clock: crashes within a minute of each
                    # other are one incident (the other ranks' copies).
                    fh.write(STEP.format(m=2 + 2 * trial, s=0, n=100 + trial) + TRACEBACK.format(r=trial % 8, t=trial))
                wrote = time.monotonic()
                ready, _, _ = select.select([proc.stdout], [], [], 10.0)
                if not ready:
                    sys.exit(f"trial {trial}: no alert within 10 s")
                proc.stdout.readline()
                latencies.append(time.monotonic() - wrote)
                # A different crash each trial (the same one would be one incident),
                # written at a random phase of the tailer's 0.5 s rounds.
                time.sleep(1.5 + random.random() * 0.5)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=10)
    print(f"crash line to alert over {len(latencies)} trials: median {statistics.median(latencies):.2f} s, "
          f"max {max(latencies):.2f} s (tail poll 0.5 s: ratio {statistics.median(latencies) / 0.5:.1f}x)")
    print("target: within 1 s of the log going quiet")


if __name__ == "__main__":
    main()
