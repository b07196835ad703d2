"""Shared bits of the real-run scripts: a tiny Llama built from a config and
synthetic token data, so every run is seconds on a CPU and downloads nothing.

Why real frameworks at all: the watcher must read what HF Trainer, torchrun
and torch.compile actually print (tqdm redraws with carriage returns, dict
lines, elastic's ChildFailedError report, dynamo's recompile warnings), and
hand-written imitations drift from the real thing.
"""

from __future__ import annotations

import os
import random

import torch

VOCAB = 128
SEQ = 32


def seed_everything(seed: int = 0) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # small, steady step times on a shared CPU


def tiny_llama():
    """A two-layer Llama from a config: no weights are downloaded."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=SEQ * 2,
    )
    return LlamaForCausalLM(cfg)


class TokenDataset(torch.utils.data.Dataset):
    """Random token ids, fixed by the seed; labels are the inputs (causal LM)."""

    def __init__(self, n: int, seq: int = SEQ, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, VOCAB, (n, seq), generator=g)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = self.data[i]
        return {"input_ids": ids, "labels": ids.clone()}


def trainer_args(out: str, steps: int, logging_steps: int, use_cpu: bool = True):
    """The HF Trainer settings every run here shares: CPU, no saving, no
    reporting, seeded; the runs differ only in length and logging cadence.
    ``use_cpu=False``: the GPU check's run (the device is chosen when the
    arguments are made, so it cannot be set afterwards)."""
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=out,
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        logging_steps=logging_steps,
        save_strategy="no",
        report_to="none",
        use_cpu=use_cpu,
        seed=0,
        dataloader_num_workers=0,
    )
