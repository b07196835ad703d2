"""Crash line to webhook POST, live: how fast an alert reaches a person's tools.

Starts a real `dflash-watch headless` following a log, with a webhook sink
pointed at a loopback HTTP server in this process. Several times, at random
phases of the tailer's 0.5 s rounds, appends a crash traceback as the last
thing in the log (the log then goes quiet) and times, from the write:

* the alert line on headless's stdout (what bench_crash_latency.py measures),
* the POST arriving at the loopback server (this benchmark),

both from the same crash in the same process, so the ratio is the cost of
the sink path (the Monitor's listener enqueues, the sink's worker sends).
Then runs benchmarks/bench_crash_latency.py itself as the reference of the
same run and prints its line.

    python benchmarks/bench_webhook_latency.py [--trials 10] [--no-reference]
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The same log lines as the stdout reference, so the two figures compare.
from benchmarks.bench_crash_latency import STEP, TRACEBACK  # noqa: E402


def serve(posts: queue.Queue) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            posts.put((time.monotonic(), body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd


def read_crash_line(proc: subprocess.Popen, timeout: float) -> float | None:
    """The monotonic time a crash alert line came out on stdout (other alerts skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        line = proc.stdout.readline()
        at = time.monotonic()
        if json.loads(line).get("detector") == "crash":
            return at


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--no-reference", action="store_true", help="skip running bench_crash_latency.py")
    args = ap.parse_args()
    posts: queue.Queue = queue.Queue()
    httpd = serve(posts)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    stdout_s, post_s = [], []
    with tempfile.TemporaryDirectory(prefix="dfw-webhook-") as tmp:
        log, config = Path(tmp) / "train.log", Path(tmp) / "c.toml"
        log.write_text("".join(STEP.format(m=0, s=i, n=i + 1) for i in range(20)))
        # The log is days old: stall waits longer than the run, so crashes are the alerts.
        config.write_text(f'[[alerts.sink]]\nkind = "webhook"\nurl = "{url}"\ndetectors = ["crash"]\n'
                          "[detectors]\nstall_min_s = 1e6\nstall_first_s = 1e6\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--config", str(config),
             "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        try:
            time.sleep(2.0)
            for trial in range(args.trials):
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(STEP.format(m=2 + 2 * trial, s=0, n=100 + trial) + TRACEBACK.format(r=trial % 8, t=trial))
                wrote = time.monotonic()
                shown = read_crash_line(proc, 10.0)
                try:
                    posted, body = posts.get(timeout=10.0)
                except queue.Empty:
                    sys.exit(f"trial {trial}: no POST within 10 s")
                if shown is None:
                    sys.exit(f"trial {trial}: no alert line within 10 s")
                assert f"trial {trial} failed" in json.loads(body)["message"], body
                stdout_s.append(shown - wrote)
                post_s.append(posted - wrote)
                time.sleep(1.5 + random.random() * 0.5)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=10)
            httpd.shutdown()
    med_out, med_post = statistics.median(stdout_s), statistics.median(post_s)
    print(f"crash line to webhook POST over {len(post_s)} trials: median {med_post:.3f} s, max {max(post_s):.3f} s")
    print(f"crash line to stdout line, same crashes:     median {med_out:.3f} s, max {max(stdout_s):.3f} s")
    extra = [p - o for p, o in zip(post_s, stdout_s)]
    print(f"POST / stdout median ratio {med_post / med_out:.3f}x; POST after the stdout line by "
          f"median {statistics.median(extra) * 1000:.1f} ms, max {max(extra) * 1000:.1f} ms")
    if not args.no_reference:
        ref = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_crash_latency.py"), "--trials",
                              str(args.trials)], capture_output=True, text=True, cwd=ROOT, timeout=300)
        line = (ref.stdout.strip().splitlines() or [ref.stderr.strip()])[0]
        print(f"reference, bench_crash_latency.py in this run: {line}")


if __name__ == "__main__":
    main()
