"""A real Lightning run (TQDMProgressBar) whose logged loss spikes, then recovers.

A tiny regression model on CPU, one epoch of ``--steps`` batches, the loss
logged with ``prog_bar=True`` (``train_loss=...`` in the bar's postfix). For
``--spike-len`` steps from ``--spike-at`` a bad batch is simulated: the loss
gets a large constant added, so its value jumps while the gradients (and the
run) stay the same, and it comes back at once. From ``--nan-at`` on the
logged loss is NaN (Lightning's bar writes it ``train_loss=nan.0``). The bar
goes to stderr; the test redirects both streams into the log.

Usage: lightning_spike_trainer.py OUTDIR [--steps N] [--spike-at S] [--spike-len K] [--nan-at S]
"""

from __future__ import annotations

import argparse
import sys
import time

import pytest

# A script the tests run in a child, but importable too: without the
# frameworks (a venv with only the README's install) it skips, never breaks
# collection.
L = pytest.importorskip("lightning")
torch = pytest.importorskip("torch")
TQDMProgressBar = pytest.importorskip("lightning.pytorch.callbacks").TQDMProgressBar


class Tiny(L.LightningModule):
    def __init__(self, spike_at: int, spike_len: int, sleep: float, nan_at: int | None = None) -> None:
        super().__init__()
        self.net = torch.nn.Linear(8, 1)
        self.spike_at, self.spike_len, self.sleep, self.nan_at = spike_at, spike_len, sleep, nan_at

    def training_step(self, batch, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if self.spike_at <= batch_idx < self.spike_at + self.spike_len:
            loss = loss + 50.0  # a bad batch: the value jumps, the gradients do not change
        if self.nan_at is not None and batch_idx >= self.nan_at:
            loss = loss * float("nan")
        self.log("train_loss", loss, prog_bar=True)
        if self.sleep:
            time.sleep(self.sleep)
        return loss

    def configure_optimizers(self):  # noqa: ANN201
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--spike-at", type=int, default=70)
    ap.add_argument("--spike-len", type=int, default=3)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--nan-at", type=int, default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.steps * 16, 8)
    y = x @ torch.randn(8, 1) + 0.3 * torch.randn(args.steps * 16, 1)  # noise: the loss settles near 0.09
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    trainer = L.Trainer(
        max_epochs=1, accelerator="cpu", devices=1, default_root_dir=args.outdir, logger=False,
        enable_checkpointing=False, enable_model_summary=False, callbacks=[TQDMProgressBar(refresh_rate=1)],
    )
    trainer.fit(Tiny(args.spike_at, args.spike_len, args.sleep, args.nan_at), loader)
    return 0


if __name__ == "__main__":
    sys.exit(main())
