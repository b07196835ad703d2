"""The real NVML reads and the Xid event wait, on a machine with a GPU.

    python scripts/gpu_check/nvml_check.py [--wait 3]

Prints, as JSON lines: what the sampler found (driver, GPUs, notices), three
samples one second apart with every health field, the Xid thread (which GPUs
registered, how long ``stop()`` took, the process's CPU time while the
thread waited with no Xid) and the kernel log reader. No Xid is provoked:
a real one needs a broken GPU, so the wait's timeout path is what runs.
Exit 0 when NVML answered, 2 when it did not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from dflash_watch.sources.nvml import GpuSampler  # noqa: E402


def say(what: str, **fields: object) -> None:
    print(json.dumps({"check": what, **fields}, default=str), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait", type=float, default=3.0, help="seconds the Xid thread waits idle")
    args = ap.parse_args()
    t0 = time.perf_counter()
    sampler = GpuSampler(health=True, xid_events=True)
    say("init", seconds=round(time.perf_counter() - t0, 3), available=sampler.available,
        unavailable=sampler.unavailable, driver=sampler.driver_version,
        gpus=[dataclasses.asdict(g) for g in sampler.gpus])
    if not sampler.available:
        return 2
    for k in range(3):
        t = time.perf_counter()
        samples = sampler.sample(time.time())
        took = time.perf_counter() - t
        for s in samples:
            say("sample", n=k, ms=round(took * 1000, 2), kind=type(s).__name__, **dataclasses.asdict(s))
        time.sleep(1.0)
    say("notices", notices=sampler.drain_notices())
    thread = sampler.xid_thread
    kernel = getattr(sampler, "_kernel", None)
    say("kernel_xid_reader", readable=kernel is not None)
    if thread is None:
        say("xid_thread", started=False)
    else:
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        time.sleep(args.wait)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        alive = thread.is_alive()
        t = time.perf_counter()
        thread.stop()
        stop_s = time.perf_counter() - t
        say("xid_thread", started=True, registered=thread.registered, alive_before_stop=alive,
            events=thread.events, idle_wait_s=round(wall, 2), process_cpu_s=round(cpu, 4),
            stop_s=round(stop_s, 3), alive_after_stop=thread.is_alive())
    sampler.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
