"""Real torch runs of a tiny MLP, for the loss detector's fixtures.

A small MLP learns a linear classification (a random teacher), every step
logged, stamped, as most scripts set up logging. Two runs:

* noisy and healthy (``noisy_small_batch_healthy.log``): Adam, 8 samples a
  step, labels with noise: each step's own loss has outliers, one report
  far above its neighbours and the next back: no spike::

      tiny_mlp_trainer.py --seed 1 > train.log 2>&1

* a runaway learning rate (``runaway_lr.log``): SGD with clipping, 64
  samples, clean labels; from step 200 a schedule bug multiplies the
  learning rate by 1.02 every step, and the loss climbs from about 0.2 to
  hundreds::

      tiny_mlp_trainer.py --sgd --batch 64 --noise 0 --ramp-at 200 --sleep 0.1 --steps 600 > train.log 2>&1
"""

from __future__ import annotations

import argparse
import logging
import time

import pytest

# A script the tests run in a child, but importable too: without torch (a
# venv with only the README's install) it skips, never breaks collection.
torch = pytest.importorskip("torch")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=2.0, help="label noise (0: clean labels)")
    ap.add_argument("--sgd", action="store_true", help="SGD (lr 0.05) with grad clipping, not Adam (lr 1e-3)")
    ap.add_argument("--ramp-at", type=int, default=0, help="from this step the lr is multiplied by --rate a step")
    ap.add_argument("--rate", type=float, default=1.02)
    ap.add_argument("--sleep", type=float, default=0.0)
    a = ap.parse_args()
    logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO)
    log = logging.getLogger("train")
    torch.manual_seed(a.seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 5))
    opt = (torch.optim.SGD(model.parameters(), lr=0.05) if a.sgd
           else torch.optim.Adam(model.parameters(), lr=1e-3))
    teacher = torch.randn(32, 5)
    for step in range(1, a.steps + 1):
        if a.ramp_at and step >= a.ramp_at:
            for group in opt.param_groups:
                group["lr"] *= a.rate
        x = torch.randn(a.batch, 32)
        logits = x @ teacher
        if a.noise:
            logits = logits + a.noise * torch.randn(a.batch, 5)
        loss = torch.nn.functional.cross_entropy(model(x), logits.argmax(1))
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) if a.sgd else None
        opt.step()
        if a.sleep:
            time.sleep(a.sleep)
        if norm is None:
            log.info("step %d/%d | loss %.4f", step, a.steps, loss.item())
        else:
            log.info("step %d/%d | loss %.4f | grad_norm %.3f | lr %.3e", step, a.steps, loss.item(), norm.item(),
                     opt.param_groups[0]["lr"])


if __name__ == "__main__":
    main()
