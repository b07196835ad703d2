"""A training loop with ``faulthandler.enable()`` that segfaults mid-run.

    python scripts/realruns/faulthandler_segfault.py > faulthandler_segfault.log 2>&1

At ``--crash-step`` a native read of address 0 (``ctypes.string_at(0)``, a
stand-in for a buggy extension) kills the process with SIGSEGV; faulthandler
writes "Fatal Python error: Segmentation fault" and the Python stack of
every thread to stderr. Progress goes through logging on stderr, so no
buffered line is lost when the process dies.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import logging
import time

import torch
import torch.nn.functional as F
from _tiny import SEQ, VOCAB, seed_everything

log = logging.getLogger("train")


def read_record(step: int, crash_step: int) -> bytes:
    """The "extension" that reads a record through a pointer it got from C:
    at ``crash_step`` that pointer is NULL (no size given, so it is read)."""
    if step == crash_step:
        return ctypes.string_at(0)
    return b"ok"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--crash-step", type=int, default=40)
    ap.add_argument("--pace", type=float, default=0.02)
    a = ap.parse_args()
    faulthandler.enable()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    seed_everything(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    batch = 8
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        read_record(step, a.crash_step)
        ids = torch.randint(0, VOCAB, (batch, SEQ + 1), generator=g)
        loss = F.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if dt < a.pace:
            time.sleep(a.pace - dt)
            dt = a.pace
        log.info("step %d/%d | loss %.4f | tok/s %.0f", step, a.steps, loss.item(), batch * SEQ / dt)


if __name__ == "__main__":
    main()
