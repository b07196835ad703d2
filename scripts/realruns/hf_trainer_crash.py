"""HF Trainer run that dies inside training: a corrupt batch at step N.

    python scripts/realruns/hf_trainer_crash.py > hf_trainer_crash.log 2>&1

The data collator hands the model one batch holding a token id past the
vocabulary (a tokenizer/vocab mismatch, a classic): the embedding raises
``IndexError: index out of range in self`` deep inside the Llama forward,
and the uncaught traceback ends the log after tqdm and dict lines (then
tqdm's own redraw at interpreter exit). With ``TQDM_MININTERVAL=5`` the bar
redraws only around the dict lines, so that exit redraw shows a later step
than the last one before the traceback.
"""

from __future__ import annotations

import argparse
import tempfile

from _tiny import VOCAB, TokenDataset, seed_everything, tiny_llama, trainer_args
from transformers import Trainer, default_data_collator


class CorruptAt:
    """default_data_collator, except batch number ``at`` (1-based) is corrupt."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def __call__(self, features):
        batch = default_data_collator(features)
        self.calls += 1
        if self.calls == self.at:
            batch["input_ids"] = batch["input_ids"].clone()
            batch["input_ids"][0, 5] = VOCAB + 7
        return batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--crash-batch", type=int, default=80)
    a = ap.parse_args()
    seed_everything(0)
    with tempfile.TemporaryDirectory() as out:
        args = trainer_args(out, a.steps, logging_steps=10)
        trainer = Trainer(
            model=tiny_llama(),
            args=args,
            train_dataset=TokenDataset(a.steps * 8),
            data_collator=CorruptAt(a.crash_batch),
        )
        trainer.train()


if __name__ == "__main__":
    main()
