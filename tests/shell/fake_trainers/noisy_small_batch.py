"""A healthy run whose per-step loss is noisy: a tiny batch, every step logged.

Nothing goes wrong: a small MLP learns a noisy linear classification with
Adam, 8 samples a step, and logs each step's own loss (stamped, as most
scripts set up logging). Per-step losses of so small a batch have
outliers, one report far above its neighbours and the next back: no spike.

Usage: noisy_small_batch.py [--steps N] [--batch B] [--seed S] > train.log 2>&1
"""

from __future__ import annotations

import argparse
import logging

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO)
    log = logging.getLogger("train")
    torch.manual_seed(a.seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 5))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    teacher = torch.randn(32, 5)
    for step in range(1, a.steps + 1):
        x = torch.randn(a.batch, 32)
        y = (x @ teacher + 2.0 * torch.randn(a.batch, 5)).argmax(1)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d/%d | loss %.4f", step, a.steps, loss.item())


if __name__ == "__main__":
    main()
