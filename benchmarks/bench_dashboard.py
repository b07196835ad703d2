#!/usr/bin/env python3
"""What the dashboard costs beside a run: CPU, peak memory, time to first paint.

Runs the real ``dflash-watch watch`` in a tmux pane (private server, 120x40)
against a log growing at ``--rate`` lines/s and a GPU sample file getting
``--gpus`` samples per second, for ``--seconds``. A separate writer process
produces the data; only the dashboard's own process is measured, from
outside (``/proc/PID/stat`` utime+stime, ``/proc/PID/status`` VmHWM).

    python benchmarks/bench_dashboard.py [--seconds 60] [--rate 100] [--gpus 8] [--reference DIR]

Targets: <= 2% of one core (issue 20, at 8 GPUs x 1 Hz and 100 lines/s), <= 150 MB peak RSS,
first paint <= 1.5 s. The load average is printed beside the figure: on a
shared machine, CPU time per unit of work rises with the load.
Prints one JSON object (and a human summary on stderr).
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
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")

WRITER = r'''
import json, sys, time
log, samples, rate, gpus, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
step = 0
start = time.time()
tick = 0.1
per_tick = max(1, round(rate * tick))
next_sample = start
with open(log, "a", buffering=1 << 16) as lf, open(samples, "a", buffering=1 << 16) as sf:
    t = start
    while t - start < seconds:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        lines = []
        for i in range(per_tick):
            if i == 0:
                step += 1
                lines.append(f"[{stamp},000] [INFO] [dflash.train] step {step}/50000 | loss 2.100 | acc_len 3.1 | "
                             f"21.5 Ktok/s | pad_eff 0.93 | lr 2.00e-04\n")
            else:
                lines.append(f"[{stamp},000] [INFO] [dflash.data] rank {i % 8}: prefetched batch {step}.{i} "
                             f"(65536 tokens, 14 sequences, bucket 3)\n")
        lf.write("".join(lines))
        lf.flush()
        if t >= next_sample:
            for gpu in range(gpus):
                sf.write(json.dumps({"time": t, "gpu": gpu, "used_bytes": 70 * 2**30 + (step % 7) * 2**20,
                                     "total_bytes": 96 * 2**30, "util": 0.97,
                                     "processes": [{"pid": 4242, "used_bytes": 69 * 2**30, "name": "python"}]}) + "\n")
            sf.flush()
            next_sample += 1.0
        t += tick
        time.sleep(max(0.0, t - time.time()))
'''


def cpu_seconds(pid: int, stat: str | None = None) -> float:
    with open(stat or f"/proc/{pid}/stat", "rb") as fh:
        raw = fh.read().decode()
    fields = raw[raw.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of ``pid`` (the main thread's id is ``pid``)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = cpu_seconds(int(tid), f"/proc/{pid}/task/{tid}/stat")
        except FileNotFoundError:  # the thread ended
            pass
    return out


def vm_hwm_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=100, help="log lines per second")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds excluded from the CPU figure")
    parser.add_argument("--profile", metavar="FILE", help="also sample the dashboard with py-spy over the measured "
                        "seconds and write its collapsed stacks (py-spy's raw format) to FILE: where the cost is")
    parser.add_argument("--reference", metavar="DIR", help="also run the dashboard of another checkout (DIR: its "
                        "root) beside this one, on the same data over the same seconds: a before/after pair that "
                        "shares the machine's load")
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        print("tmux is required", file=sys.stderr)
        return 2
    # A private server on a socket of its own path, removed at the end (a
    # name under -L leaves its socket in tmux's folder after kill-server).
    socket = Path(tempfile.gettempdir(), f"dfw-bench-{uuid.uuid4().hex[:8]}.sock")

    def tmux(*a: str) -> str:
        return subprocess.run(["tmux", "-S", str(socket), *a], capture_output=True, text=True, timeout=10).stdout

    with tempfile.TemporaryDirectory() as tmp:
        log, samples, writer_py = Path(tmp, "train.log"), Path(tmp, "gpu.jsonl"), Path(tmp, "writer.py")
        log.touch()
        samples.touch()
        writer_py.write_text(WRITER)
        total = args.seconds + args.warmup + 5
        writer = subprocess.Popen([sys.executable, str(writer_py), str(log), str(samples), str(args.rate),
                                   str(args.gpus), str(total)])
        try:
            time.sleep(0.5)  # some data exists before the dashboard starts, as beside a real run
            t0 = time.monotonic()
            roots = {"ui": ROOT} | ({"ref": Path(args.reference).resolve()} if args.reference else {})
            pids = {}
            for name, root in roots.items():
                cmd = (f"exec env -u COLUMNS -u LINES PYTHONPATH={root} {sys.executable} -m dflash_watch.cli watch "
                       f"--log {log} --gpu-samples {samples} --no-gpu")
                tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", cmd)
                pids[name] = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])
            pid = pids["ui"]
            first_paint = first_data = None
            while time.monotonic() - t0 < 20 and first_data is None:
                screen = tmux("capture-pane", "-p", "-t", "ui")
                if first_paint is None and "throughput" in screen:
                    first_paint = time.monotonic() - t0
                if re.search(r"step [\d,]+/50,000", screen) and "GPU 7" in screen:
                    first_data = time.monotonic() - t0
                    if os.environ.get("BENCH_DEBUG"):
                        print(screen, file=sys.stderr)
                time.sleep(0.02)
            time.sleep(max(0.0, args.warmup - (time.monotonic() - t0)))
            w0 = time.monotonic()
            before = {name: (cpu_seconds(p), thread_cpu_seconds(p)) for name, p in pids.items()}
            step0 = _step(tmux("capture-pane", "-p", "-t", "ui"))
            spy = None
            if args.profile:
                # Non-blocking: py-spy never stops the dashboard, so the CPU figure stays its own.
                spy_exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
                spy = subprocess.Popen([spy_exe, "record", "--nonblocking", "--rate", "250", "--format", "raw",
                                        "--duration", str(int(args.seconds)), "--output", args.profile,
                                        "--pid", str(pid)], stdout=subprocess.DEVNULL)
            time.sleep(args.seconds)
            after = {name: (cpu_seconds(p), thread_cpu_seconds(p)) for name, p in pids.items()}
            w1 = time.monotonic()
            step1 = _step(tmux("capture-pane", "-p", "-t", "ui"))
            hwm = vm_hwm_mb(pid)
            if spy is not None:
                try:
                    spy.wait(timeout=30)
                except subprocess.TimeoutExpired:  # it lags on a loaded machine: keep what it wrote
                    spy.terminate()
                    spy.wait()
        finally:
            tmux("kill-server")
            socket.unlink(missing_ok=True)
            writer.kill()
            writer.wait()

    def cost(name: str) -> dict[str, float | list[float]]:
        (c0, t0s), (c1, t1s), p = before[name], after[name], pids[name]
        return {"cpu_percent_of_one_core": round(100 * (c1 - c0) / (w1 - w0), 2),
                # The event loop (layout, paint, the redraw) apart from the source and writer threads.
                "main_thread_cpu_percent": round(100 * (t1s.get(p, 0.0) - t0s.get(p, 0.0)) / (w1 - w0), 2),
                "other_threads_cpu_percent": sorted((round(100 * (t1s[t] - t0s.get(t, 0.0)) / (w1 - w0), 2)
                                                     for t in t1s if t != p), reverse=True)}

    result = {
        "seconds": round(w1 - w0, 1),
        "log_lines_per_s": args.rate,
        "gpus": args.gpus,
        **cost("ui"),
        "peak_rss_mb": round(hwm, 1),
        "first_paint_s": None if first_paint is None else round(first_paint, 2),
        "first_data_s": None if first_data is None else round(first_data, 2),
        "steps_seen": [step0, step1],
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if args.reference:
        result["reference"] = {"root": str(roots["ref"]), **cost("ref")}
    print(json.dumps(result))
    ok = (result["cpu_percent_of_one_core"] <= 2.0 and hwm <= 150 and first_paint is not None and first_paint <= 1.5)
    if args.reference:
        print(f"reference {args.reference}: cpu {result['reference']['cpu_percent_of_one_core']}% of one core",
              file=sys.stderr)
    print(f"cpu {result['cpu_percent_of_one_core']}% of one core (target <= 2%), peak RSS {result['peak_rss_mb']} MB "
          f"(<= 150), first paint {result['first_paint_s']} s (<= 1.5), data on screen {result['first_data_s']} s; "
          f"{'within targets' if ok else 'OVER TARGET'}", file=sys.stderr)
    return 0


def _step(screen: str) -> int | None:
    m = re.search(r"step ([\d,]+)/50,000", screen)
    return int(m.group(1).replace(",", "")) if m else None


if __name__ == "__main__":
    sys.exit(main())
