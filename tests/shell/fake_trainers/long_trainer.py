"""Fake long trainer: records its pid, then "trains" until stopped.

``--ignore INT,TERM`` makes it ignore those signals (to test abort
escalation); with ``--marker WORD`` it also records its pid under that word
(``marker_file``), so a test finds the trainers it started without looking
at any other process on the machine.
Python's default SIGINT handling ends it the way Ctrl-C ends a real run.
"""

import argparse
import os
import signal
import time

parser = argparse.ArgumentParser()
parser.add_argument("--pid-file", required=True)
parser.add_argument("--marker", default="")
parser.add_argument("--ignore", default="")
parser.add_argument("--config", default="")  # only to be on the command line (fingerprint tests)
args = parser.parse_args()
for name in filter(None, args.ignore.split(",")):
    signal.signal(getattr(signal, f"SIG{name}"), signal.SIG_IGN)
with open(args.pid_file, "a", encoding="utf-8") as fh:
    fh.write(f"{os.getpid()}\n")
if args.marker:
    import tempfile

    markers = os.path.join(tempfile.gettempdir(), "dfw-test-markers")
    os.makedirs(markers, exist_ok=True)
    with open(os.path.join(markers, f"{args.marker}.pids"), "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
while True:
    time.sleep(0.1)
