"""CPU of `dflash-watch headless` on a busy node, beside `tail -F` of the same files.

The target (issue 12): at most 1% of one core at 8 GPUs x 1 Hz with 100 log
lines/s. This process plays the node: it appends 100 step lines a second
to a log and 8 GPU sample lines a second (CONTRACTS section 3) to a
``--gpu-samples`` file, and scrapes ``/metrics`` every 15 s as Prometheus
would. Two children watch the same files over the same window:

* ``tail -F LOG SAMPLES > /dev/null`` (the reference: following two files
  and nothing else),
* ``dflash-watch headless --log LOG --gpu-samples SAMPLES --metrics-port 0``.

Each child's CPU is its own ``/proc/<pid>/stat`` utime+stime (only the
processes started here), measured after a warm-up, printed as % of one
core and as a ratio to the reference.

    python benchmarks/bench_headless_cpu.py [--seconds 40] [--warmup 5] [--no-metrics]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
GPUS = 8
TOTAL = 143_771_277_312  # an H200's memory, bytes


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (its threads included), from its own /proc stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14 and 15 of proc(5)


def step_line(n: int) -> str:
    now = datetime.now()
    return (f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d} - INFO - dflash.train - "
            f"step {n}/500000 | loss {2.3 - n * 1e-6:.4f} | lr 3.0e-04 | 21.5 Ktok/s\n")


def sample_lines(t: float, n: int) -> str:
    return "".join(json.dumps({"time": t, "gpu": g, "used_bytes": 76_235_669_504 + (n % 7) * 1_048_576,
                               "total_bytes": TOTAL, "util": 0.97}) + "\n" for g in range(GPUS))


def feed(log: Path, samples: Path, stop: threading.Event, lines_per_s: float) -> None:
    """100 log lines a second in 10 ms ticks, 8 samples once a second, paced by the clock."""
    n = 0
    start = time.monotonic()
    next_sample = start
    with open(log, "a", buffering=1) as lf, open(samples, "a", buffering=1) as sf:
        while not stop.is_set():
            now = time.monotonic()
            due = int((now - start) * lines_per_s)
            if due > n:
                lf.write("".join(step_line(i) for i in range(n + 1, due + 1)))
                n = due
            if now >= next_sample:
                sf.write(sample_lines(time.time(), n))
                next_sample += 1.0
            stop.wait(0.01)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0, help="measured window")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring (start-up, catch-up)")
    ap.add_argument("--lines-per-s", type=float, default=100.0)
    ap.add_argument("--no-metrics", action="store_true", help="headless without --metrics-port")
    opts = ap.parse_args()
    tail = shutil.which("tail")
    if tail is None:
        print("tail not found: no reference", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-headless-cpu-"))
    log, samples = tmp / "train.log", tmp / "gpu.jsonl"
    log.write_text(step_line(0))
    samples.write_text(sample_lines(time.time(), 0))
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(log, samples, stop, opts.lines_per_s), daemon=True)
    argv = [sys.executable, "-m", "dflash_watch.cli", "headless", "--log", str(log), "--gpu-samples", str(samples)]
    if not opts.no_metrics:
        argv += ["--metrics-port", "0"]
    procs: list[subprocess.Popen] = []
    try:
        feeder.start()
        ref = subprocess.Popen([tail, "-F", str(log), str(samples)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        procs.append(ref)
        watcher = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(watcher)
        url = None
        if not opts.no_metrics:
            assert watcher.stderr is not None
            for line in watcher.stderr:
                found = re.search(r"metrics on (http://\S+/metrics)", line)
                if found:
                    url = found.group(1)
                    break
        # stderr/stdout drained off the measured process's way (a full pipe would block it).
        for stream in (watcher.stdout, watcher.stderr):
            threading.Thread(target=lambda s=stream: [None for _ in s], daemon=True).start()
        time.sleep(opts.warmup)
        begin = {p.pid: cpu_seconds(p.pid) for p in procs}
        t0 = time.monotonic()
        scrapes = 0
        while time.monotonic() - t0 < opts.seconds:
            if watcher.poll() is not None:
                print(f"headless exited with {watcher.returncode}", file=sys.stderr)
                return 1
            if url:
                with urllib.request.urlopen(url, timeout=5) as r:
                    r.read()
                scrapes += 1
            time.sleep(min(15.0, max(0.0, opts.seconds - (time.monotonic() - t0))))
        wall = time.monotonic() - t0
        used = {p.pid: cpu_seconds(p.pid) - begin[p.pid] for p in procs}
        seen = None
        if url:  # it kept up: the step it last read, beside the lines written
            with urllib.request.urlopen(url, timeout=5) as r:
                found = re.search(rb"^dflash_step (\S+)$", r.read(), re.M)
            seen = int(float(found.group(1))) if found else None
        written = sum(1 for _ in open(log)) - 1
    finally:
        stop.set()
        feeder.join(2)
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    ref_pct = 100 * used[ref.pid] / wall
    hl_pct = 100 * used[watcher.pid] / wall
    print(f"load: {opts.lines_per_s:.0f} log lines/s, {GPUS} GPUs x 1 Hz samples, "
          f"{scrapes} /metrics scrapes, {wall:.1f} s measured after {opts.warmup:.0f} s warm-up; "
          f"machine load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"tail -F (reference)       {used[ref.pid]:.3f} s CPU  {ref_pct:.3f}% of one core")
    print(f"dflash-watch headless     {used[watcher.pid]:.3f} s CPU  {hl_pct:.3f}% of one core")
    if url:
        print(f"headless read up to step {seen} of {written} written")
    ratio = f"{hl_pct / ref_pct:.1f}x" if ref_pct > 0 else "inf (tail used no measurable CPU)"
    print(f"headless / tail -F: {ratio}; target: headless <= 1% of one core -> "
          f"{'met' if hl_pct <= 1.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
