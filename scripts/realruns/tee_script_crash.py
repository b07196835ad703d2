"""A plain training loop printing ``step N/M | loss ... | tok/s ...`` lines
that dies on a non-finite loss, run through tee as people do:

    python scripts/realruns/tee_script_crash.py 2>&1 | tee tee_script_crash.log

stdout is a pipe, so Python block-buffers it (8 KiB): a live watcher sees
the progress lines arrive in bursts, not one per step. Python flushes stdout
before it prints the uncaught traceback, so in the finished log the
traceback still comes last.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F
from _tiny import SEQ, VOCAB, seed_everything


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--nan-step", type=int, default=260)
    a = ap.parse_args()
    seed_everything(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    batch = 16
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        ids = torch.randint(0, VOCAB, (batch, SEQ + 1), generator=g)
        logits = model(ids[:, :-1])
        if step == a.nan_step:  # an fp overflow upstream: the logits go inf
            logits = logits * float("inf")
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        assert math.isfinite(loss.item()), f"loss is {loss.item()} at step {step}"
        opt.zero_grad()
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        print(f"step {step}/{a.steps} | loss {loss.item():.4f} | lr 1.00e-03 | tok/s {batch * SEQ / dt:,.0f}")


if __name__ == "__main__":
    main()
