"""Fake trainer: logs a few steps, then dies of a traceback with exit code 3."""

import sys
import time

log_path = sys.argv[1]
code = int(sys.argv[2]) if len(sys.argv) > 2 else 3
with open(log_path, "a", encoding="utf-8") as log:
    for step in range(1, 4):
        log.write(f"2026-11-29 10:00:0{step} step {step}/100 loss 2.5{step} tok/s 21500\n")
    log.write("Traceback (most recent call last):\n")
    log.write('  File "train.py", line 42, in <module>\n')
    log.write("RuntimeError: fake crash\n")
    log.flush()
time.sleep(0.05)
sys.exit(code)
