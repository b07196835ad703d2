"""CPU cost of the GPU health reads (issue 19) at 8 GPUs x 1 Hz.

Against the fake NVML of the tests (8 H100s), in one run: the sampler
without the health reads (``health=False``, no Xid thread: what it read
before issue 19) and with them (temperature, power, SM clock, throttle
reasons, ECC, row remaps, PCIe link; the static reads every STATIC_EVERY
samples; the Xid event thread waiting beside it). Prints the NVML calls per
sample per GPU (the fake counts them), the time of one ``sample()`` of all
8 GPUs, the ratio, and the share of one core at 1 Hz. The fake's calls are
cheap Python: a real driver adds its ioctl time per call, so the call count
is the figure that carries over (run with --real on a machine with GPUs).

    python benchmarks/bench_nvml_reads.py [--samples 1000] [--real]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "shell"))

from dflash_watch.sources.nvml import GpuSampler  # noqa: E402

_EVENT_FNS = ("nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlEventSetWait_v2", "nvmlEventSetFree")


def run(n: int, health: bool, counts: Counter[str] | None) -> tuple[float, float, int]:
    """(seconds per sample of all GPUs, NVML calls per sample per GPU, GPUs)."""
    sampler = GpuSampler(health=health, xid_events=health, kmsg_path=None)
    if not sampler.available:
        raise SystemExit(f"NVML not available: {sampler.unavailable}")
    gpus = len(sampler.gpus)
    sampler.sample(time.time())  # warm: v2 probing, names, the first static reads
    before = Counter(counts) if counts is not None else Counter()
    started = time.perf_counter()
    for i in range(n):
        sampler.sample(1_764_410_400.0 + i)
    took = time.perf_counter() - started
    calls = 0.0
    if counts is not None:
        calls = sum(v - before[k] for k, v in counts.items() if k not in _EVENT_FNS) / (n * gpus)
    sampler.close()
    return took / n, calls, gpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--real", action="store_true", help="the real driver instead of the fake")
    args = parser.parse_args()
    counts: Counter[str] | None = None
    undo = None
    if not args.real:
        from fake_nvml import FakeNvml

        fake = FakeNvml.eight()
        fake.wait_cap_ms = 500  # the event thread waits as long as on a real driver
        undo = fake.patch()
        counts = fake.counts
    try:
        # Interleaved, best of three each: the machine is shared.
        before = min(run(args.samples, False, counts)[0] for _ in range(3))
        after = min(run(args.samples, True, counts)[0] for _ in range(3))
        _, calls_before, gpus = run(min(args.samples, 200), False, counts)
        _, calls_after, _ = run(min(args.samples, 200), True, counts)
    finally:
        if undo is not None:
            undo()
    label = "real driver" if args.real else "fake NVML"
    print(f"{label}, {gpus} GPUs, {args.samples} samples each (best of 3):")
    if counts is not None:
        print(f"  NVML calls per sample per GPU: before {calls_before:.2f}, after {calls_after:.2f}")
    print(f"  sample() of all {gpus} GPUs: before {before * 1e6:.0f} us, after {after * 1e6:.0f} us")
    print(f"  ratio after/before: {after / before:.2f}x")
    print(f"  CPU at 1 Hz: before {before * 100:.3f}% of one core, after {after * 100:.3f}%")


if __name__ == "__main__":
    main()
