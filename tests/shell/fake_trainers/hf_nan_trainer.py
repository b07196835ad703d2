"""A real HF Trainer run whose learning rate blows the weights up: grad_norm nan.

A tiny GPT-2 built from a config (no download), random token data, CPU,
``logging_steps=1``; at step ``--blow-at`` the learning rate jumps to an
absurd value: within a step the
weights overflow and the logged ``grad_norm`` turns nan, while HF's default
``logging_nan_inf_filter`` keeps the logged loss finite. Its stdout (the
``{'loss': ..., 'grad_norm': ...}`` dicts) is the log under test.

``--stamped``: Python logging set up as HF's example scripts do
(``%(asctime)s - %(levelname)s - %(name)s - %(message)s``, INFO), and a
stamped step line per logged step beside the dicts: a log with a clock.

Usage: hf_nan_trainer.py OUTDIR [--steps N] [--blow-at STEP] [--blow-lr LR] [--sleep S] [--stamped]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import pytest

# A script the tests run in a child, but importable too: without the
# frameworks (a venv with only the README's install) it skips, never breaks
# collection.
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
GPT2Config, GPT2LMHeadModel = transformers.GPT2Config, transformers.GPT2LMHeadModel
Trainer, TrainerCallback, TrainingArguments = transformers.Trainer, transformers.TrainerCallback, transformers.TrainingArguments


class BlowUp(TrainerCallback):
    """From step ``at`` the learning rate is ``lr`` (a schedule gone wrong), and
    each step sleeps ``sleep`` s so that a live watcher sees the run unfold."""

    def __init__(self, at: int, lr: float, sleep: float) -> None:
        self.at, self.lr, self.sleep = at, lr, sleep

    def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        sched = kwargs.get("lr_scheduler")
        if state.global_step == self.at and sched is not None:
            sched.base_lrs = [self.lr for _ in sched.base_lrs]  # the constant schedule's lambda multiplies these

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        if self.sleep:
            time.sleep(self.sleep)


class StepLines(TrainerCallback):
    """A stamped line per logged step, as a training script's own logger writes it."""

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001, ANN201
        if logs and "loss" in logs:
            logging.getLogger("__main__").info("step %d | loss %s", state.global_step, logs["loss"])


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seq: int, vocab: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.x[i], "labels": self.x[i]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--blow-at", type=int, default=12)
    ap.add_argument("--blow-lr", type=float, default=1e20)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--stamped", action="store_true")
    args = ap.parse_args()
    if args.stamped:
        logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
        transformers.logging.set_verbosity_info()
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    targs = TrainingArguments(
        output_dir=args.outdir, max_steps=args.steps, learning_rate=args.lr, lr_scheduler_type="constant",
        per_device_train_batch_size=4, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
        disable_tqdm=True, seed=0,
    )
    trainer = Trainer(model=model, args=targs, train_dataset=Tokens(256, 32, 128), callbacks=[BlowUp(args.blow_at, args.blow_lr, args.sleep), *([StepLines()] if args.stamped else [])])
    trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
