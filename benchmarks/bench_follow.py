"""A log growing at 50k lines/s, followed live by `dflash-watch headless` (issue 20).

A real writer process (this script with ``--writer``) appends the
progress shape of ``benchmarks/speed_logs.py`` (30% progress: stamped
step lines with Ktok/s, tqdm bars with a tok/s postfix, data-loader
lines, glog warnings, tracebacks), restamped with the wall clock, at a
controlled rate (every 10 ms the lines then due, in one ``write``), for
``--seconds``; then a final crash (a traceback with a token of its own)
and silence. A real ``dflash-watch headless --no-gpu`` follows the log
from its start. Measured:

* headless's CPU over the writing window, from ``/proc/<pid>/stat`` of
  the process started here (its threads included), as % of one core;
* while writing, how far behind it is: the wall clock beside the stamp of
  the last progress ``/metrics`` says it has read (the writer stamps lines
  with the wall clock, to the second), every ``--every`` s;
* how long its threads waited for a CPU (``/proc/<pid>/task/*/schedstat``):
  on a shared machine, lag with a long wait is the machine's, not its own;
* the CPU it took to read every line, spread over the writing window:
  the share of a core it needs, whatever share a shared machine gave it;
* its lag at the end: from the final crash's write to its alert line on
  headless's stdout (every line before it read first).

``--skew S`` stamps the lines S seconds behind the wall clock (naive stamps
written in another zone, a skewed host); "behind" is then counted from the
stamps' own clock. The log already holds lines when headless starts, so it
is caught up and followed on its own clock (no offset to move events by).

It keeps up when that lag stays within ``--max-lag`` s (the tailer's rounds
plus the crash's quiet wait); within one core when CPU <= 100%.

    python benchmarks/bench_follow.py [--rate 50000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.speed_logs import write_log  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
_US = re.compile(rb"\d\d/\d\d/2026 \d\d:\d\d:\d\d")
_GLOG = re.compile(rb"W\d{4} \d\d:\d\d:\d\d")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (its threads included), from its own /proc stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14 and 15 of proc(5)


def cpu_wait(pid: int) -> float:
    """Seconds ``pid``'s threads spent runnable but waiting for a CPU (schedstat's second field)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended, or a kernel without schedstats
    return total / 1e9


def final_crash(token: str, skew: float = 0.0) -> bytes:
    stamp = time.strftime("%m/%d/%Y %H:%M:%S", time.localtime(time.time() - skew)).encode()
    return (stamp + b" - INFO - __main__ - saving checkpoint\n"
            b"Traceback (most recent call last):\n"
            b'  File "/opt/dflash/train.py", line 412, in <module>\n'
            b"    main()\n"
            b'  File "/opt/dflash/train.py", line 377, in train_step\n'
            b"    loss.backward()\n"
            b"RuntimeError: CUDA error: an illegal memory access was encountered (" + token.encode() + b")\n")


def writer(log: Path, rate: float, seconds: float, token: str, skew: float = 0.0) -> int:
    """The training job: ``rate`` lines/s of the progress shape for ``seconds``,
    then the final crash; prints when it wrote that, on the monotonic clock.
    Lines are stamped ``skew`` seconds behind the wall clock."""
    total = int(rate * seconds)
    template = log.with_suffix(".template")
    write_log(template, total, "progress")
    lines = template.read_bytes().splitlines(keepends=True)
    template.unlink()
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("ready", flush=True)
    start = time.monotonic()
    done = 0
    while done < len(lines):
        due = min(len(lines), int((time.monotonic() - start) * rate) + 1)
        if due > done:
            block = b"".join(lines[done:due])
            now = time.localtime(time.time() - skew)
            block = _US.sub(time.strftime("%m/%d/%Y %H:%M:%S", now).encode(), block)
            block = _GLOG.sub(time.strftime("W%m%d %H:%M:%S", now).encode(), block)
            os.write(out, block)
            done = due
        time.sleep(0.01)
    elapsed = time.monotonic() - start
    os.write(out, final_crash(token, skew))
    print(f"crash {time.monotonic()} {done} {elapsed:.2f}", flush=True)
    os.close(out)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=50_000.0, help="lines/s written")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds of writing")
    ap.add_argument("--every", type=float, default=2.0, help="seconds between /metrics reads while writing")
    ap.add_argument("--max-lag", type=float, default=3.0, help="crash-to-alert seconds that still count as keeping up")
    ap.add_argument("--skew", type=float, default=0.0, help="seconds the writer's stamps run behind the wall clock")
    ap.add_argument("--writer", nargs=2, metavar=("LOG", "TOKEN"), help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.writer:
        return writer(Path(opts.writer[0]), opts.rate, opts.seconds, opts.writer[1], opts.skew)
    tmp = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    log = tmp / "train.log"
    log.write_bytes(b"")
    token = f"bench-follow-{os.getpid()}"
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # as users run it
    procs: list[subprocess.Popen] = []
    try:
        job = subprocess.Popen(
            [sys.executable, __file__, "--rate", str(opts.rate), "--seconds", str(opts.seconds),
             "--skew", str(opts.skew), "--writer", str(log), token], stdout=subprocess.PIPE, text=True, env=env,
        )
        procs.append(job)
        assert job.stdout is not None
        if job.stdout.readline().strip() != "ready":
            print("the writer did not start", file=sys.stderr)
            return 1
        watcher = subprocess.Popen(
            [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log),
             "--metrics-port", "0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        procs.append(watcher)
        assert watcher.stdout is not None and watcher.stderr is not None
        url = None
        for raw in watcher.stderr:
            found = re.search(r"metrics on (http://\S+/metrics)", raw.decode(errors="replace"))
            if found:
                url = found.group(1)
                break
        threading.Thread(target=lambda: [None for _ in watcher.stderr], daemon=True).start()  # type: ignore[union-attr]
        # The writer's progress, read off its stdout as it goes.
        written = {"crash_at": 0.0, "lines": 0, "elapsed": 0.0}

        def follow_writer() -> None:
            for line in job.stdout:  # type: ignore[union-attr]
                parts = line.split()
                if parts and parts[0] == "crash":
                    written["crash_at"], written["lines"], written["elapsed"] = (
                        float(parts[1]), int(parts[2]), float(parts[3]))

        threading.Thread(target=follow_writer, daemon=True).start()
        begin = cpu_seconds(watcher.pid)
        t0 = time.monotonic()
        behind: list[tuple[float, float]] = []
        wait_begin = cpu_wait(watcher.pid)
        wait_end = wait_begin
        alerts: list[tuple[float, bytes]] = []
        next_look = t0 + opts.every
        crash_seen: float | None = None
        cpu_all = float("nan")
        cpu_end: float | None = None
        stdout = watcher.stdout
        while time.monotonic() - t0 < opts.seconds + 60:
            ready, _, _ = select.select([stdout], [], [], 0.05)
            if ready:
                line = stdout.readline()
                if not line:
                    break
                alerts.append((time.monotonic(), line))
                if token.encode() in line:
                    crash_seen = time.monotonic()
                    cpu_all = cpu_seconds(watcher.pid) - begin
                    break
            if written["crash_at"] and cpu_end is None:
                cpu_end, t_end = cpu_seconds(watcher.pid), time.monotonic()
                wait_end = cpu_wait(watcher.pid)
            if url and time.monotonic() >= next_look and not written["crash_at"]:
                next_look += opts.every
                with urllib.request.urlopen(url, timeout=5) as r:
                    stamp = re.search(rb"^dflash_last_progress_timestamp_seconds (\S+)$", r.read(), re.M)
                seen = float(stamp.group(1)) if stamp else float("nan")
                behind.append((time.monotonic() - t0, time.time() - opts.skew - seen))
        if cpu_end is None:
            cpu_end, t_end = cpu_seconds(watcher.pid), time.monotonic()
            wait_end = cpu_wait(watcher.pid)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    wall = t_end - t0
    core = 100 * (cpu_end - begin) / wall
    rate = written["lines"] / max(written["elapsed"], 1e-9)
    print(f"writer: {written['lines']:,} lines in {written['elapsed']:.1f} s ({rate:,.0f} lines/s, "
          f"progress shape{f', stamped {opts.skew:.0f} s behind' if opts.skew else ''}); machine load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("behind while writing (wall clock - stamp of the last progress read, 1 s resolution): "
          + " ".join(f"t={at:.0f}s:{lag:.1f}s" for at, lag in behind))
    print(f"headless CPU while writing: {cpu_end - begin:.2f} s over {wall:.1f} s = {core:.0f}% of one core; "
          f"its threads waited {wait_end - wait_begin:.2f} s for a CPU (a shared machine's share)")
    kinds = [json.loads(a).get("detector", "?") for _, a in alerts]
    print(f"alerts printed: {len(alerts)} ({', '.join(sorted(set(kinds)))})")
    if crash_seen is None:
        print("final crash: NO alert (headless did not keep up or missed it)")
        lag = float("inf")
    else:
        lag = crash_seen - written["crash_at"]
        print(f"final crash line to its alert: {lag:.2f} s")
    if crash_seen is not None:
        # Whatever share of the machine it got: the CPU it took to read all
        # of it, spread over the time it was written. Over 100%: no core
        # could keep up.
        need = 100 * cpu_all / max(written["elapsed"], 1e-9)
        print(f"CPU to read all {written['lines']:,} lines: {cpu_all:.2f} s = {need:.0f}% of one core "
              f"over the {written['elapsed']:.1f} s they were written in")
        core = max(core, need)
    within = core <= 100.0
    keeps = lag <= opts.max_lag
    print(f"within one core: {'yes' if within else 'NO'}; keeps up (lag <= {opts.max_lag:.0f} s): "
          f"{'yes' if keeps else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
