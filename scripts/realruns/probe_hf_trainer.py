"""A real HF Trainer run with the probe's callback: padded batches, on CPU.

    python scripts/realruns/probe_hf_trainer.py OUT_DIR [--steps N]

Trains the tiny Llama of ``_tiny.py`` (built from its config, nothing
downloaded) on sequences of varied length, padded per batch to the longest
by the collator, with gradient accumulation of 2, and
``DflashProbeCallback`` writing ``OUT_DIR/dflash-probe-rank0.jsonl``. The
collator also records every batch it made in ``OUT_DIR/batches.jsonl``
(size, padded length, real tokens), in order: the truth a test compares
the probe's lines with, one optimizer step per two micro-batches.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from _tiny import SEQ, VOCAB, seed_everything, tiny_llama, trainer_args  # noqa: E402

ACCUMULATE = 2


class VariedLengths(torch.utils.data.Dataset):
    """Token ids of lengths 4..SEQ, fixed by the seed."""

    def __init__(self, n: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(4, SEQ + 1, (n,), generator=g)
        self.data = [torch.randint(1, VOCAB, (int(k),), generator=g) for k in lengths]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.data[i]}


class PadToLongest:
    """Pads a batch to its longest sequence (pad id 0, labels -100) and records it."""

    def __init__(self, record: str) -> None:
        self.record = open(record, "w", encoding="utf-8")

    def __call__(self, rows: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        longest = max(len(r["input_ids"]) for r in rows)
        ids = torch.zeros(len(rows), longest, dtype=torch.long)
        mask = torch.zeros(len(rows), longest, dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[i, :n] = r["input_ids"]
            mask[i, :n] = 1
        labels = ids.masked_fill(mask == 0, -100)
        self.record.write(json.dumps({"batch_size": len(rows), "seq_len": longest,
                                      "tokens": int(mask.sum())}) + "\n")
        self.record.flush()
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    seed_everything()
    from transformers import Trainer

    from dflash_watch.probe.hf import DflashProbeCallback

    training = trainer_args(os.path.join(args.out, "trainer"), args.steps, logging_steps=2)
    training.gradient_accumulation_steps = ACCUMULATE
    training.per_device_train_batch_size = 4
    probe = DflashProbeCallback(path=os.path.join(args.out, "dflash-probe-rank0.jsonl"), every_steps=4)
    trainer = Trainer(
        model=tiny_llama(),
        args=training,
        train_dataset=VariedLengths(4 * ACCUMULATE * args.steps + 8),
        data_collator=PadToLongest(os.path.join(args.out, "batches.jsonl")),
        callbacks=[probe],
    )
    trainer.train()
    return 0


if __name__ == "__main__":
    sys.exit(main())
