"""A training loop that runs out of host memory, cheaply.

    python scripts/realruns/host_oom.py > host_oom.log 2>&1
    python scripts/realruns/host_oom.py --numpy > host_oom_numpy.log 2>&1

At ``--oom-step`` an "eval" builds a dense (n, n) pair mask for 16.7 M
tokens: 256 TiB, more than any address space, so the allocation fails at
once without touching memory. torch raises ``RuntimeError: ...
DefaultCPUAllocator: can't allocate memory``; with ``--numpy`` numpy raises
its MemoryError subclass (``_ArrayMemoryError: Unable to allocate ...``).
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import torch
import torch.nn.functional as F
from _tiny import SEQ, VOCAB, seed_everything

log = logging.getLogger("train")


def pair_mask(n_tokens: int, use_numpy: bool):
    if use_numpy:
        return np.ones((n_tokens, n_tokens), dtype=np.bool_)
    return torch.ones(n_tokens, n_tokens, dtype=torch.bool)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--oom-step", type=int, default=40)
    ap.add_argument("--numpy", action="store_true")
    ap.add_argument("--pace", type=float, default=0.02)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    seed_everything(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    batch = 8
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        ids = torch.randint(0, VOCAB, (batch, SEQ + 1), generator=g)
        loss = F.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == a.oom_step:
            log.info("step %d: eval, building the pair mask", step)
            pair_mask(1 << 24, a.numpy)
        dt = time.perf_counter() - t0
        if dt < a.pace:
            time.sleep(a.pace - dt)
            dt = a.pace
        log.info("step %d/%d | loss %.4f | tok/s %.0f", step, a.steps, loss.item(), batch * SEQ / dt)


if __name__ == "__main__":
    main()
