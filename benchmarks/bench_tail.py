"""How close read_chunks comes to ``wc -l`` on a 1M-line (~100 MB) log.

read_chunks should cost little more than I/O plus one UTF-8 decode: it is on
the replay hot path, ahead of the parsers.  Run: ``python benchmarks/bench_tail.py``
(``--lines N`` to change the size, ``--keep`` to leave the file).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dflash_watch.sources.logtail import Chunk, LogTailer, read_chunks  # noqa: E402


def write_log(path: Path, n: int) -> int:
    """A plausible training log: mostly ~100-byte step lines, some tqdm and warnings."""
    with open(path, "wb", buffering=1 << 20) as fh:
        for i in range(n):
            if i % 1000 == 999:
                fh.write(b"[rank0]:W1129 10:00:00.123456 12 torch/_dynamo/convert_frame.py:844] recompile \xc3\xa9\n")
            elif i % 97 == 0:
                fh.write(b"  3%%|\xe2\x96\x8e  | %d/30000 [00:10<01:40, 2.9it/s]\r  4%%|\r\n" % i)
            else:
                fh.write(b"11/29/2026 10:%02d:%02d - INFO - step %8d | loss 2.3456 | tok/s 21534.2 | lr 3.0e-4 | grad_norm 0.8812\n"
                         % (i // 60 % 60, i % 60, i))
    return path.stat().st_size


def best_of(runs: int, fn):  # type: ignore[no-untyped-def]
    best = float("inf")
    result = None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def lines_in(last: Chunk | None) -> int:
    # Only the last chunk is counted, so the consumer's own work stays out of the timing.
    return 0 if last is None else last.first_lineno - 1 + last.text.count("\n")


def count_read_chunks(path: str) -> int:
    last = None
    for item in read_chunks(path):
        if isinstance(item, Chunk):
            last = item
    return lines_in(last)


def count_tailer(path: str) -> int:
    last = None
    with LogTailer([path], use_watchdog=False) as t:
        while items := t.poll():
            last = next((i for i in reversed(items) if isinstance(i, Chunk)), last)
    return lines_in(last)


def decode_floor(path: str, chunk: int = 1 << 20) -> float:
    """The unavoidable part, data already in memory: one decode and one newline count per chunk."""
    raw = Path(path).read_bytes()
    start = time.perf_counter()
    n = 0
    for i in range(0, len(raw), chunk):
        piece = raw[i : i + chunk]
        str(piece, "utf-8", "replace")
        n += piece.count(b"\n")
    seconds = time.perf_counter() - start
    assert n > 0
    return seconds


def wc_l(path: str) -> int:
    return int(subprocess.run(["wc", "-l", path], capture_output=True, check=True, text=True).stdout.split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_tail_"))
    path = tmp / "train.log"
    size = write_log(path, args.lines)
    try:
        wc_s, wc_n = best_of(args.runs, lambda: wc_l(str(path)))  # also warms the page cache
        rc_s, rc_n = best_of(args.runs, lambda: count_read_chunks(str(path)))
        lt_s, lt_n = best_of(args.runs, lambda: count_tailer(str(path)))
        assert rc_n == wc_n == lt_n == args.lines, (rc_n, wc_n, lt_n)
        fl_s = min(decode_floor(str(path)) for _ in range(args.runs))
        print(f"file: {args.lines} lines, {size / 1e6:.1f} MB (page cache warm), best of {args.runs}")
        rows = (("wc -l (subprocess)", wc_s), ("decode+count floor", fl_s),
                ("read_chunks", rc_s), ("LogTailer.poll", lt_s))
        for name, secs in rows:
            print(f"{name:20s} {secs:7.3f} s  {args.lines / secs / 1e6:6.2f} M lines/s  "
                  f"{size / secs / 1e6:7.0f} MB/s  x{secs / wc_s:.2f} of wc -l")
    finally:
        if not args.keep:
            path.unlink()
            os.rmdir(tmp)


if __name__ == "__main__":
    main()
