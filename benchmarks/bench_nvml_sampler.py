"""Cost of GpuSampler.sample per GPU per sample.

By default against the fake NVML of the tests (8 GPUs, 2 processes on GPU 0,
1 on the others, names read from the real /proc), which measures the
sampler's own Python overhead: the fake's calls are cheap Python, so a real
driver adds its ioctl time on top (printed separately with --real on a
machine with GPUs). Also prints the bare cost of the same fake calls made
without the sampler, to separate the sampler's overhead from the fake's.

    python benchmarks/bench_nvml_sampler.py [--samples 2000] [--real]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "shell"))

import pynvml  # noqa: E402

from dflash_watch.sources.nvml import GpuSampler  # noqa: E402


def bare_calls(n: int, count: int) -> float:
    """The same NVML calls the sampler makes, with nothing around them."""
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    started = time.perf_counter()
    for _ in range(n):
        for h in handles:
            pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            pynvml.nvmlDeviceGetUtilizationRates(h)
            pynvml.nvmlDeviceGetComputeRunningProcesses(h)
            pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)
    return time.perf_counter() - started


def measure(n: int, label: str) -> None:
    sampler = GpuSampler()
    if not sampler.available:
        print(f"{label}: {sampler.unavailable}")
        return
    count = len(sampler.gpus)
    sampler.job_pids = {os.getpid()}
    sampler.sample(time.time())  # warm: v2 probing, name cache
    started = time.perf_counter()
    for i in range(n):
        sampler.sample(1_764_410_400.0 + i)
    took = time.perf_counter() - started
    per = took / (n * count) * 1e6
    bare = bare_calls(n, count) / (n * count) * 1e6
    print(f"{label}: {count} GPUs, {n} samples: {per:.1f} us per GPU per sample "
          f"({per * count:.0f} us per sample of all GPUs; "
          f"the bare NVML calls alone: {bare:.1f} us per GPU)")
    sampler.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--real", action="store_true", help="also measure the real NVML of this machine")
    args = ap.parse_args()

    from fake_nvml import FakeNvml

    fake = FakeNvml.eight()
    fake.gpus[0].compute.append((os.getpid(), 1 << 30))  # one name from the real /proc
    undo = fake.patch()
    try:
        measure(args.samples, "fake NVML")
    finally:
        undo()
    if args.real:
        measure(args.samples, "real NVML")


if __name__ == "__main__":
    main()
