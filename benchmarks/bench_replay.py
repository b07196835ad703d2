"""Speed of `dflash-watch replay --json` against grep on the same file.

Writes a realistic training log (timestamped progress lines, logger noise,
tqdm bars redrawn with '\\r' and drawn with '█' as tqdm does on a UTF-8
stream, NCCL chatter, a few tracebacks and recompile warnings), then in one
process times:

* `grep -cE` of a typical pattern over the file (the reference),
* `dflash-watch replay --json` over the file, in a child process that
  reports its own peak RSS (ru_maxrss), start-up included,

and prints lines/s and the ratio. Run twice with different lengths to see
that peak RSS does not grow with the log (the pipeline streams).

    python benchmarks/bench_replay.py [--lines 1200000] [--keep DIR] [--bars ascii]

Targets (issue 2): >= 1M lines/s, within 10x of grep's time, and peak RSS
independent of the log's length.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/dflash/train.py", line 412, in <module>
    main()
  File "/opt/dflash/train.py", line 398, in main
    trainer.train_step(batch)
  File "/opt/dflash/trainer.py", line 221, in train_step
    loss = self.model(**batch).loss
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
"""

RECOMPILE = (
    "[rank{r}]:W1129 {hms}.123000 4242 torch/_dynamo/convert_frame.py:1016] [0/8] torch._dynamo hit config.recompile_limit (8)\n"
    "[rank{r}]:W1129 {hms}.123000 4242 torch/_dynamo/convert_frame.py:1016] [0/8]    function: 'forward' (/opt/dflash/model.py:88)\n"
    "[rank{r}]:W1129 {hms}.123000 4242 torch/_dynamo/convert_frame.py:1016] [0/8]    last reason: 0/7: L['x'].size()[1] == 512\n"
)


def write_log(path: Path, n_lines: int, seed: int = 1, bar: str = "█") -> int:
    rng = random.Random(seed)
    t0 = 1_764_410_400  # 2025-11-29 10:00 UTC
    written = 0
    step = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        buf: list[str] = []
        while written < n_lines:
            t = t0 + written // 20  # ~20 lines per second of run time
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f",{rng.randrange(1000):03d}"
            r = rng.random()
            if r < 0.08:
                step += 1
                tps = 21500 * (1 + rng.uniform(-0.05, 0.05))
                buf.append(
                    f"{stamp} - INFO - dflash.train - step {step}/500000 | loss {2.3 + rng.random():.4f} | "
                    f"acc_len 3.4 | {tps / 1000:.1f} Ktok/s | pad_eff 0.93 | lr 2.0e-04\n"
                )
                written += 1
            elif r < 0.10:
                redraws = "".join(
                    f"\rEvaluating: {p:3d}%|{bar * (p // 10):<10}| {p}/100 [00:{p % 60:02d}<00:10, 9.8it/s]" for p in range(0, 101, 20)
                )
                buf.append(redraws + "\n")
                written += 1
            elif r < 0.12:
                buf.append(f"[rank{rng.randrange(8)}]:[W1129 10:00:00.000000000 ProcessGroupNCCL.cpp:4561] NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/IPC\n")
                written += 1
            elif r < 0.1203:
                buf.append(TRACEBACK)
                written += TRACEBACK.count("\n")
            elif r < 0.1205:
                hms = time.strftime("%H:%M:%S", time.gmtime(t))
                text = RECOMPILE.format(r=rng.randrange(8), hms=hms)
                buf.append(text)
                written += text.count("\n")
            else:
                buf.append(
                    f"{stamp} - INFO - dflash.data - loaded shard {rng.randrange(10**6)} with "
                    f"{rng.randrange(10**5)} samples from /data/shards/part-{rng.randrange(9999):04d}.arrow\n"
                )
                written += 1
            if len(buf) >= 10000:
                fh.write("".join(buf))
                buf.clear()
        fh.write("".join(buf))
    return written


def time_grep(path: Path) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(["grep", "-cE", r"tok/s|Traceback|Error", str(path)], capture_output=True, text=True)
    return time.perf_counter() - start, out.stdout.strip()


CHILD = (
    "import resource, sys\n"
    "from dflash_watch.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "sys.stderr.write('maxrss_kib=%d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def time_replay(path: Path) -> tuple[float, int, int]:
    """Seconds, alert lines, and the child's own peak RSS in KiB."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "replay", "--json", "--tz", "UTC", str(path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"replay failed ({proc.returncode}): {proc.stderr.strip()}")
    rss = int(proc.stderr.rsplit("maxrss_kib=", 1)[1].split()[0])
    return elapsed, proc.stdout.count("\n"), rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_200_000)
    ap.add_argument("--keep", help="write the log here and keep it")
    ap.add_argument(
        "--bars", choices=("unicode", "ascii"), default="unicode",
        help="tqdm's bar character: '█' as tqdm writes it to a UTF-8 stream (default), or '#'",
    )
    args = ap.parse_args()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="dfw-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        rows = []
        for n in (args.lines // 2, args.lines):
            log = tmp / f"train-{n}.log"
            lines = write_log(log, n, bar="█" if args.bars == "unicode" else "#")
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
