"""A small language-model training loop on CUDA, for the GPU check.

    python scripts/gpu_check/train_cuda.py LOG_DIR [--device cuda] [--steady 25] [--pressure 20]

It writes progress lines in the DFlash drafter's format to stdout (block
buffered when PYTHONUNBUFFERED is unset, as users run it) and probe lines
to ``LOG_DIR/dflash-probe-rank0.jsonl``. Three phases, by the wall clock:

1. steady: training steps (real tokens/s, real loss);
2. pressure: the GPU filled to about 98% of its memory by a plain
   allocation while training goes on (what ``memory_pressure`` must see
   through NVML);
3. a real CUDA out-of-memory: an allocation larger than the card, not
   caught, so torch's own traceback ends the log and the process exits 1.

On ``--device cpu`` the pressure and OOM phases are skipped (it is how the
script is tried on a machine without a GPU).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import torch  # noqa: E402

from dflash_watch.probe import Probe  # noqa: E402

VOCAB, DIM, BATCH, SEQ = 8192, 1024, 16, 512


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("log_dir")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steady", type=float, default=25.0)
    ap.add_argument("--pressure", type=float, default=20.0)
    ap.add_argument("--step-s", type=float, default=0.1, help="pace: at least this long per step")
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Embedding(VOCAB, DIM),
        torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(), torch.nn.Linear(4 * DIM, DIM),
        torch.nn.Linear(DIM, VOCAB),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    probe = Probe(os.path.join(args.log_dir, "dflash-probe-rank0.jsonl"), rank=0, every_steps=10, every_s=2.0)
    print(f"Starting training on {dev} (pid {os.getpid()})")
    total = 100000
    ballast: list[torch.Tensor] = []
    start = time.time()
    phase = "steady"
    step = 0
    while True:
        t0 = time.perf_counter()
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), device=dev)
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = loss.detach().item()  # synchronises: the step's time is the GPU's
        took = time.perf_counter() - t0
        step += 1
        # loss and grad_norm as 0-d CUDA tensors: the probe reads them at its flush.
        probe.step(ids, tokens=BATCH * SEQ, step=step, loss=loss.detach(), grad_norm=grad_norm,
                   step_seconds=max(took, args.step_s), compute_seconds=took)
        rest = args.step_s - took
        if rest > 0:
            time.sleep(rest)
        rate = BATCH * SEQ / (time.perf_counter() - t0)
        print(f"step {step}/{total} | loss {value:.3f} | {rate / 1000:.1f} Ktok/s | lr 3.00e-04")
        elapsed = time.time() - start
        if dev.type != "cuda":
            if elapsed >= args.steady:
                break
            continue
        if phase == "steady" and elapsed >= args.steady:
            phase = "pressure"
            free, whole = torch.cuda.mem_get_info()
            take = free - int(0.015 * whole)  # leave about 1.5%: used ends near 98%
            ballast.append(torch.empty(take, dtype=torch.uint8, device=dev))
            free, whole = torch.cuda.mem_get_info()
            print(f"Holding {take / 2**30:.1f} GiB: {100 * (1 - free / whole):.1f}% of GPU memory in use")
        elif phase == "pressure" and elapsed >= args.steady + args.pressure:
            sys.stdout.flush()
            # Not caught: torch's own OutOfMemoryError traceback ends the log.
            torch.empty(2 * torch.cuda.get_device_properties(dev).total_memory, dtype=torch.uint8, device=dev)
    probe.close()
    print("Training finished")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
