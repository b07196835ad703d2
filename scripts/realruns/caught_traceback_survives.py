"""A training loop that catches a bad batch, logs it with
``logging.exception`` (a full traceback) and goes on training.

    python scripts/realruns/caught_traceback_survives.py > caught_traceback_survives.log 2>&1

Every ``--every`` steps the loader yields a batch whose targets are one
sample short; F.cross_entropy raises a real ValueError, the loop logs it at
ERROR with its traceback, skips the batch and keeps printing progress. A
watcher must not call this run dead.
"""

from __future__ import annotations

import argparse
import logging
import time

import torch
import torch.nn.functional as F
from _tiny import SEQ, VOCAB, seed_everything

log = logging.getLogger("train")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=130)
    ap.add_argument("--every", type=int, default=30)
    ap.add_argument("--pace", type=float, default=0.02)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    seed_everything(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    batch, skipped = 8, 0
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        ids = torch.randint(0, VOCAB, (batch, SEQ + 1), generator=g)
        targets = ids[:, 1:]
        if step % a.every == 0:  # a short final record in one shard
            targets = targets[:-1]
        try:
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        except ValueError:
            skipped += 1
            log.exception("step %d: bad batch, skipping it (%d skipped so far)", step, skipped)
            continue
        opt.zero_grad()
        loss.backward()
        opt.step()
        dt = max(time.perf_counter() - t0, 1e-9)
        if dt < a.pace:
            time.sleep(a.pace - dt)
            dt = a.pace
        log.info("step %d/%d | loss %.4f | tok/s %.0f", step, a.steps, loss.item(), batch * SEQ / dt)
    log.info("training done: %d steps, %d batches skipped", a.steps, skipped)


if __name__ == "__main__":
    main()
