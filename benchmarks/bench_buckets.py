"""`dflash-watch buckets` on 1.1M lengths against `sort -n` of the same file.

The target (issue 11): optimal boundaries for K=6 over 1.1M lengths in at
most twice the time `sort -n` takes to sort them. In alternating rounds on
one seeded file this times

* ``sort -n FILE > /dev/null`` (the reference),
* ``dflash-watch buckets FILE --k 6 --json`` as a whole command in a fresh
  interpreter (Python and numpy start-up included),
* the same work in this process (read, DP, JSON): the command minus start-up,

and prints the medians and the ratios to the reference.

The lengths are long-tailed like chat/instruction data tokenised for a
drafter: most conversations short, a heavy tail, truncated at 8192 (the
truncated ones pile up at 8192).

    python benchmarks/bench_buckets.py [--samples 1100000] [--rounds 5] [--k 6]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def realistic_lengths(n: int, seed: int = 0, max_len: int = 8192):  # noqa: ANN201
    """Seeded long-tailed lengths in [16, max_len]: a mixture of a short
    mode (single-turn answers) and a long one (multi-turn, code), both
    log-normal, with what exceeds ``max_len`` truncated to it."""
    import numpy as np

    rng = np.random.default_rng(seed)
    long = rng.random(n) < 0.3
    x = np.where(long, rng.lognormal(np.log(1800), 0.65, n), rng.lognormal(np.log(600), 0.7, n))
    return np.clip(np.rint(x), 16, max_len).astype(np.int64)


def write_lengths(path: Path, n: int, seed: int = 0) -> None:
    x = realistic_lengths(n, seed)
    path.write_text("\n".join(map(str, x.tolist())) + "\n", encoding="ascii")


def time_sort(path: Path) -> float:
    start = time.perf_counter()
    with open(path, "rb") as src:
        subprocess.run(["sort", "-n"], stdin=src, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def time_command(path: Path, k: int) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "dflash_watch.cli", "buckets", str(path), "--k", str(k), "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, out.stdout


def time_in_process(path: Path, k: int) -> tuple[float, str]:
    from dflash_watch.buckets.lengths import read_lengths
    from dflash_watch.buckets.plan import make_plan
    from dflash_watch.buckets.report import to_json

    start = time.perf_counter()
    text = to_json(make_plan(read_lengths(path), k, source=str(path)))
    return time.perf_counter() - start, text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=6)
    args = ap.parse_args()
    if shutil.which("sort") is None:
        print("sort not found", file=sys.stderr)
        return 2
    import json

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lengths.txt"
        write_lengths(path, args.samples)
        size = path.stat().st_size
        print(f"{args.samples:,} lengths, {size / 1e6:.1f} MB text, K={args.k}, {args.rounds} rounds")
        sort_t, cmd_t, proc_t = [], [], []
        result = ""
        time_command(path, args.k)  # warm the page cache and the interpreter's .pyc files
        for _ in range(args.rounds):
            sort_t.append(time_sort(path))
            t, result = time_command(path, args.k)
            cmd_t.append(t)
            proc_t.append(time_in_process(path, args.k)[0])
        ref = statistics.median(sort_t)
        cmd = statistics.median(cmd_t)
        proc = statistics.median(proc_t)
        got = json.loads(result)
        print(f"boundaries {got['boundaries']}  padding efficiency {got['padding_efficiency']:.4f}")
        print(f"sort -n                      median {ref:.3f} s")
        print(f"dflash-watch buckets (whole) median {cmd:.3f} s   ratio to sort -n {cmd / ref:.2f}")
        print(f"in-process read+DP+JSON      median {proc:.3f} s   ratio to sort -n {proc / ref:.2f}")
        print(f"target: whole command <= 2.00 x sort -n: {'met' if cmd <= 2 * ref else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
