"""Speed of `dflash-watch replay --json` against grep and the per-event path.

On each of three log shapes (``benchmarks/speed_logs.py``: quiet and
data-heavy, progress-heavy as in issue 20, many ranks; US-format stamps,
tqdm bars with tok/s, data-loader lines, glog warnings, tracebacks) this
times, in one run, in rounds that interleave them:

* ``grep -cE`` of a typical pattern over the file (the reference),
* ``dflash-watch replay --json`` over the file (the fast path), in a child
  process that reports its own peak RSS (ru_maxrss) and its children's,
  start-up included; where a CPU is spare it parses the log in a forked
  child of its own while it judges (``dflash_watch.parse_ahead``), so its
  wall time is the figure a user waits for and its CPU time is both
  processes',
* the same with the log parsed in one process (``DFLASH_WATCH_PARSE_AHEAD=0``,
  "serial"): the CPU one core spends on it,
* the same replay with every fast path off (``--per-event``: the stream's
  ``fast=False``, the plain retiming, step lines fed one at a time
  (``Monitor.step_runs``), a redrawn bar's states read one at a time
  (``redraws.COLUMNS_MIN``) and no compiled kernel, as
  tests/shell/test_fast_path_equivalence.py switches them), whose alerts
  must be the same,
* the fast path without the compiled kernels (``DFLASH_WATCH_PURE=1``, what
  an install without a C compiler runs; ``parsers.native``), whose alerts
  must be the same too,

and prints lines/s, the ratio to grep and to the per-event path, and peak
RSS. Lines/s are given by wall time (the fast path, two processes) and by
CPU time (user + sys of the child and its own children, from ``wait4``:
the serial path's is the cost on one core, and on a shared, loaded machine
wall time also measures the other jobs). Medians over the rounds.

    python benchmarks/bench_replay.py [--lines 1200000] [--shapes quiet,progress,ranks] [--rounds 3]
    python benchmarks/bench_replay.py --legacy   # the earlier ISO-stamped log, two lengths

Targets (issue 20): >= 1M lines/s and within 10x of grep's time on every
shape, peak RSS bounded (independent of the log's length).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def time_grep(path: Path) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(["grep", "-cE", r"tok/s|Traceback|Error", str(path)], capture_output=True, text=True)
    return time.perf_counter() - start, out.stdout.strip()


CHILD = (
    "import resource, sys\n"
    "if sys.argv[1] == '--per-event':\n"
    "    import dataclasses, functools\n"
    "    from dflash_watch import ingest as R, monitor as M\n"
    "    from dflash_watch.parsers import clock as C, step_clock as S\n"
    "    from dflash_watch.parsers.stream import LogStream\n"
    "    def plain(e, t, clocked=None):\n"
    "        if clocked is None or not isinstance(e, C.Progress):\n"
    "            return dataclasses.replace(e, time=t)\n"
    "        return dataclasses.replace(e, time=t, clocked=clocked)\n"
    "    R.LogStream = functools.partial(LogStream, fast=False)\n"
    "    C.at_time = S.at_time = plain\n"
    "    M.Monitor.step_runs = False\n"
    "    from dflash_watch.parsers.progress import redraws as D\n"
    "    D.COLUMNS_MIN = 10 ** 9\n"
    "    C._in_order = lambda floor, events: False\n"
    "del sys.argv[1]\n"
    "from dflash_watch.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "sys.stderr.write('maxrss_kib=%d\\n' % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "                 + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def child_env() -> dict[str, str]:
    """The children's environment, with compiled modules cached as an install has them.

    These machines set PYTHONDONTWRITEBYTECODE=1, so every child would compile
    ~90 modules from source (~0.2 s of each figure) where a pip install runs
    from its .pyc files. The cache goes to a folder of its own, never into the
    tree; the first run of each kind fills it (``warm_up``).
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "dflash-watch-bench-pycache")
    return env


def warm_up(tmp: Path) -> None:
    """One replay of each kind before any timing, so the module cache is filled."""
    log = tmp / "warm-up.log"
    log.write_text("step 1/10 | loss 2.0 | 100 tok/s\n", encoding="utf-8")
    for per_event, pure in ((False, False), (True, False), (False, True)):
        time_replay_cpu(log, per_event, pure)


def time_cmd(argv: list[str], pure: bool = False, serial: bool = False) -> tuple[float, float, str, str]:
    """Wall and CPU seconds of one child run (CPU from the children's rusage);
    ``pure``: without the compiled kernels; ``serial``: no parse-ahead child."""
    import resource

    env = child_env()
    if pure:
        env["DFLASH_WATCH_PURE"] = "1"
    if serial:
        env["DFLASH_WATCH_PARSE_AHEAD"] = "0"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1],
        env=env,
    )
    out, err = proc.communicate()  # reaps it: its rusage joins RUSAGE_CHILDREN
    wall = time.perf_counter() - start
    code = proc.returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if code not in (0, 1):  # grep -c exits 1 when it counts nothing
        sys.exit(f"{argv[:3]} failed ({code}): {err.strip()[-500:]}")
    return wall, cpu, out, err


def time_replay(path: Path, per_event: bool = False) -> tuple[float, int, int]:
    """Seconds, alert lines, and the child's own peak RSS in KiB."""
    wall, _cpu, alerts, rss = time_replay_cpu(path, per_event)
    return wall, len(alerts), rss


def time_replay_cpu(
    path: Path, per_event: bool = False, pure: bool = False, serial: bool = False
) -> tuple[float, float, list[str], int]:
    """Wall and CPU seconds, the alert JSON lines, the child's peak RSS in KiB
    (with its parse-ahead child's, where it had one: the two at once, at
    most). ``per_event``: every fast path off, and no compiled kernel;
    ``pure``: no compiled kernel; ``serial``: no parse-ahead child."""
    flag = "--per-event" if per_event else "--fast"
    wall, cpu, out, err = time_cmd(
        [sys.executable, "-c", CHILD, flag, "replay", "--json", "--tz", "UTC", str(path)], pure=pure or per_event,
        serial=serial,
    )
    rss = int(err.rsplit("maxrss_kib=", 1)[1].split()[0])
    return wall, cpu, out.splitlines(), rss


def time_grep_cpu(path: Path) -> tuple[float, float]:
    wall, cpu, _out, _err = time_cmd(["grep", "-cE", r"tok/s|Traceback|Error", str(path)])
    return wall, cpu


def startup_cpu(tmp: Path, rounds: int) -> float:
    """CPU seconds of the fast replay of a one-line log (the interpreter,
    the imports, the scanner's compile): what every figure below holds
    once, whatever the log's length. Median of ``rounds`` (at least 3)."""
    log = tmp / "one-line.log"
    log.write_text("step 1/10 | loss 2.0 | 100 tok/s\n", encoding="utf-8")
    return statistics.median(time_replay_cpu(log)[1] for _ in range(max(3, rounds)))


def shapes_main(args: argparse.Namespace, tmp: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from speed_logs import write_log as write_shape

    startup = startup_cpu(tmp, args.rounds)
    print(f"start-up (a one-line log): {startup:.3f} s CPU; 'past it': lines / (serial cpu - start-up), the rate "
          "a longer log tends to on one core")
    print(
        f"{'shape':>9} {'lines':>9} {'MB':>6} {'grep s':>6} {'fast wall':>9} {'lines/s':>11} {'x grep':>6} "
        f"{'fast cpu':>8} {'serial cpu':>10} {'lines/s cpu':>11} {'past it':>11} {'x grep cpu':>10} "
        f"{'per-event':>9} {'x faster':>8} {'pure cpu':>8} {'x pure':>6} {'RSS MB':>7} {'RSS p-e':>7} same"
    )
    for shape in args.shapes.split(","):
        log = tmp / f"{shape}-{args.lines}.log"
        lines = write_shape(log, args.lines, shape)
        size = log.stat().st_size
        rows: dict[str, list[float]] = {k: [] for k in ("g", "gw", "f", "fw", "s", "sw", "p", "pw", "u", "uw")}
        rss_f = rss_p = 0
        same = True
        for i in range(args.rounds):
            order = ("g", "f", "s", "u", "p") if i % 2 == 0 else ("p", "u", "s", "f", "g")
            fast_alerts: list[str] = []
            serial_alerts: list[str] = []
            slow_alerts: list[str] = []
            pure_alerts: list[str] = []
            for what in order:
                if what == "g":
                    w, c = time_grep_cpu(log)
                elif what == "f":
                    w, c, fast_alerts, rss = time_replay_cpu(log)
                    rss_f = max(rss_f, rss)
                elif what == "s":
                    w, c, serial_alerts, _rss = time_replay_cpu(log, serial=True)
                elif what == "u":
                    w, c, pure_alerts, _rss = time_replay_cpu(log, pure=True)
                else:
                    w, c, slow_alerts, rss = time_replay_cpu(log, per_event=True)
                    rss_p = max(rss_p, rss)
                rows[what].append(c)
                rows[what + "w"].append(w)
            same = same and fast_alerts == serial_alerts == slow_alerts == pure_alerts
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(
            f"{shape:>9} {lines:>9} {size / 1e6:>6.1f} {med['gw']:>6.3f} {med['fw']:>9.2f} {lines / med['fw']:>11,.0f} "
            f"{med['fw'] / med['gw']:>6.1f} {med['f']:>8.2f} {med['s']:>10.2f} {lines / med['s']:>11,.0f} "
            f"{lines / max(med['s'] - startup, 1e-9):>11,.0f} {med['s'] / med['g']:>10.1f} {med['p']:>9.2f} "
            f"{med['p'] / med['f']:>8.2f} {med['u']:>8.2f} {med['u'] / med['f']:>6.2f} "
            f"{rss_f / 1024:>7.1f} {rss_p / 1024:>7.1f} {same}",
            flush=True,
        )
    print("'fast wall', 'lines/s', 'x grep': wall seconds, the log parsed in a child while the replay judges "
          "(grep's wall time the reference); 'fast cpu': both processes' CPU; 'serial cpu', 'lines/s cpu', "
          "'x grep cpu': one process, CPU seconds (user + sys); medians")
    print("'x faster': per-event / fast, 'x pure': without the compiled kernels / with (CPU, both parse ahead); "
          "'RSS MB': the replay's peak plus its child's; 'same': alert lines equal, all four")
    print("targets: >= 1,000,000 lines/s; <= 10x grep; peak RSS flat in the log's length")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_200_000)
    ap.add_argument("--shapes", default="quiet,progress,ranks", help="comma-separated shapes of speed_logs.py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--legacy", action="store_true", help="the earlier ISO-stamped log, at half and full length")
    ap.add_argument("--keep", help="write the logs here and keep them")
    ap.add_argument(
        "--bars", choices=("unicode", "ascii"), default="unicode",
        help="(--legacy) tqdm's bar character: '█' as tqdm writes it to a UTF-8 stream (default), or '#'",
    )
    args = ap.parse_args()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="dfw-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        warm_up(tmp)
        if not args.legacy:
            shapes_main(args, tmp)
            return
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from speed_logs import write_log

        rows = []
        for n in (args.lines // 2, args.lines):
            log = tmp / f"train-{n}.log"
            lines = write_log(log, n, "legacy", bar="█" if args.bars == "unicode" else "#")
            size = log.stat().st_size
            g_s, g_count = time_grep(log)
            r_s, alerts, rss = time_replay(log)
            rows.append((lines, size, g_s, g_count, r_s, alerts, rss))
        print(f"{'lines':>10} {'MB':>7} {'grep s':>7} {'replay s':>9} {'lines/s':>12} {'x grep':>7} {'alerts':>7} {'peak RSS MB':>12}")
        for lines, size, g_s, _g_count, r_s, alerts, rss in rows:
            print(
                f"{lines:>10} {size / 1e6:>7.1f} {g_s:>7.3f} {r_s:>9.3f} {lines / r_s:>12,.0f} "
                f"{r_s / g_s:>7.1f} {alerts:>7} {rss / 1024:>12.1f}"
            )
        print("targets: >= 1,000,000 lines/s; <= 10x grep; peak RSS flat between the two lengths")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
