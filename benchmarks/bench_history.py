"""History bound and cost: five days at 1 Hz for 8 GPUs.

Prints bytes held (the ring buffers, and what tracemalloc sees for the
whole structure), the cost per appended sample, and that the cost does not
grow with age (O(1): the last hour costs what the first did).

    python benchmarks/bench_history.py [--days 5] [--gpus 8]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dflash_watch.history import DEFAULT_TIERS, GpuHistory  # noqa: E402
from dflash_watch.parsers.events import GpuSample  # noqa: E402

T0 = 1_764_410_400.0
HOUR = 3600


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=5.0)
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()
    seconds = int(args.days * 86400)

    tracemalloc.start()
    history = GpuHistory()
    for gpu in range(args.gpus):  # creates every series up front
        history.add(GpuSample(T0, gpu, 70 << 30, 80 << 30))
    built, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    series = [history.used(g) for g in range(args.gpus)]
    hourly: list[float] = []
    base = 70 << 30
    started = time.perf_counter()
    for hour_start in range(1, seconds, HOUR):
        t_hour = time.perf_counter()
        for i in range(hour_start, min(hour_start + HOUR, seconds)):
            t = T0 + i
            v = float(base + (i % 97) * 4096)
            for s in series:
                s.append(t, v)
        hourly.append(time.perf_counter() - t_hour)
    fill = time.perf_counter() - started
    appends = (seconds - 1) * args.gpus

    # Through GpuHistory.add (what the Monitor calls), one hour more.
    samples = [GpuSample(T0 + seconds + i, g, base, 80 << 30) for i in range(2 * HOUR) for g in range(args.gpus)]
    half = len(samples) // 2
    t_add = time.perf_counter()
    for sample in samples[:half]:
        history.add(sample)
    add_cost = (time.perf_counter() - t_add) / half
    # A second hour under tracemalloc (slower, so not timed): does memory grow?
    gc.collect()
    tracemalloc.start()
    for sample in samples[half:]:
        history.add(sample)
    grown, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    t_win = time.perf_counter()
    w = history.used(0).window(args.days * 86400)
    win_cost = time.perf_counter() - t_win

    tiers = ", ".join(f"{w:g} s x {c}" if w else f"raw x {c}" for w, c in DEFAULT_TIERS)
    print(f"tiers: {tiers}")
    print(f"{args.gpus} GPUs x {args.days:g} days at 1 Hz = {appends:,} samples in {fill:.1f} s")
    print(f"ring buffers: {history.nbytes:,} bytes ({history.nbytes / 1e6:.2f} MB); "
          f"whole structure per tracemalloc: {built:,} bytes ({built / 1e6:.2f} MB); limit 20 MB")
    print(f"SeriesHistory.append: {fill / appends * 1e6:.2f} us/sample; "
          f"first hour {hourly[0] / (HOUR * args.gpus) * 1e6:.2f}, last hour {hourly[-1] / (HOUR * args.gpus) * 1e6:.2f} us/sample")
    print(f"GpuHistory.add (5 days in): {add_cost * 1e6:.2f} us/sample; memory grown by that hour: {grown:,} bytes")
    print(f"window({args.days:g} days): {len(w[0])} buckets in {win_cost * 1e3:.2f} ms")
    assert history.nbytes < 20e6 and built < 20e6


if __name__ == "__main__":
    main()
