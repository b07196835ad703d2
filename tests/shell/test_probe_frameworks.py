"""The ready callbacks: a real HF Trainer run, and Lightning's hooks.

The HF case runs scripts/realruns/probe_hf_trainer.py as a live training
process (tiny Llama, padded batches of varied length, gradient
accumulation 2) and compares each probe line with the batches its
collator recorded. Lightning's hooks are called directly with real torch
tensors (Lightning is not a dependency); where Lightning is installed, a
real ``Trainer.fit`` runs too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch): the probe is checked with real tensors")

from dflash_watch.probe import Probe
from dflash_watch.sources.probes import read_probe_file

ROOT = Path(__file__).resolve().parents[2]
ACCUMULATE = 2  # the script's gradient accumulation


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.slow
def test_hf_trainer_run_writes_true_counts(tmp_path: Path) -> None:
    steps = 4
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "realruns" / "probe_hf_trainer.py"), str(tmp_path),
         "--steps", str(steps)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = _jsonl(tmp_path / "dflash-probe-rank0.jsonl")
    batches = _jsonl(tmp_path / "batches.jsonl")  # in the order the loader made them
    assert [ln["step"] for ln in lines] == list(range(1, steps + 1))
    for line, i in zip(lines, range(0, steps * ACCUMULATE, ACCUMULATE)):
        micro = batches[i:i + ACCUMULATE]
        assert line["tokens"] == sum(b["tokens"] for b in micro)
        assert line["padded_tokens"] == sum(b["batch_size"] * b["seq_len"] for b in micro)
        assert line["batch_size"] == sum(b["batch_size"] for b in micro)
        assert line["seq_len"] == max(b["seq_len"] for b in micro)
        assert 0 < line["tokens"] <= line["padded_tokens"]
        assert line["rank"] == 0 and isinstance(line["time"], float)
        assert not {"alloc_retries", "reserved_bytes", "allocated_bytes"} & set(line)  # CPU: absent
    # Health figures (issue 19): every step timed; loss and grad norm on the logged steps (every 2).
    assert all(ln["step_seconds"] > 0 for ln in lines)
    assert [("loss" in ln, "grad_norm" in ln) for ln in lines] == [(False, False), (True, True)] * (steps // 2)
    # The padded batches really were padded: efficiency below 1 somewhere.
    assert any(s.padding_efficiency < 1.0 for s in read_probe_file(tmp_path / "dflash-probe-rank0.jsonl"))


def test_hf_callback_hook_counts_training_forwards_only(tmp_path: Path) -> None:
    from dflash_watch.probe.hf import DflashProbeCallback

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)

        def forward(self, input_ids=None, attention_mask=None):  # noqa: ANN001, ANN201
            return self.emb(input_ids).sum()

    model = Tiny()
    callback = DflashProbeCallback(path=tmp_path / "p.jsonl", every_steps=100)
    state = SimpleNamespace(global_step=0)
    callback.on_train_begin(None, state, None, model=model)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    model(input_ids=torch.zeros(2, 3, dtype=torch.long), attention_mask=mask)
    model(input_ids=torch.zeros(1, 5, dtype=torch.long), attention_mask=torch.ones(1, 5))
    model.eval()
    model(input_ids=torch.zeros(4, 9, dtype=torch.long), attention_mask=torch.ones(4, 9))  # eval: not counted
    model.train()
    state.global_step = 1
    callback.on_step_end(None, state, None)
    callback.on_train_end(None, state, None)
    model(input_ids=torch.zeros(2, 3, dtype=torch.long))  # the hook is gone after training
    assert callback._micro == []
    (line,) = _jsonl(tmp_path / "p.jsonl")
    assert {k: line[k] for k in ("step", "tokens", "padded_tokens", "batch_size", "seq_len")} == {
        "step": 1, "tokens": 8, "padded_tokens": 11, "batch_size": 3, "seq_len": 5}


def test_hf_callback_fills_step_seconds_loss_and_grad_norm(tmp_path: Path) -> None:
    """Step time from its own begin/end; loss and grad norm from ``on_log``,
    which comes after ``on_step_end``: added to that step's line. A NaN
    grad norm (HF's nan filter hides a NaN loss in the average) survives."""
    import math
    import time

    from dflash_watch.probe.hf import DflashProbeCallback

    callback = DflashProbeCallback(path=tmp_path / "p.jsonl", every_steps=100)
    state = SimpleNamespace(global_step=0)
    for step, logs in ((1, None), (2, {"loss": 3.5, "grad_norm": float("nan"), "learning_rate": 1e-3})):
        callback.on_step_begin(None, state, None)
        time.sleep(0.02)
        state.global_step = step
        callback.on_step_end(None, state, None)
        callback.on_log(None, state, None, logs=logs)
    callback.on_log(None, state, None, logs={"eval_loss": 9.0})  # not the training loss
    callback.on_train_end(None, state, None)
    samples = list(read_probe_file(tmp_path / "p.jsonl"))
    assert [s.step for s in samples] == [1, 2]
    assert all(s.step_seconds is not None and 0.02 <= s.step_seconds < 1.0 for s in samples)
    assert (samples[0].loss, samples[0].grad_norm) == (None, None)
    assert samples[1].loss == 3.5 and math.isnan(samples[1].grad_norm)


def test_lightning_hooks_fill_loss_and_step_seconds(tmp_path: Path) -> None:
    from dflash_watch.probe.lightning import ProbeHooks

    hooks = ProbeHooks(Probe(tmp_path / "p.jsonl", every_steps=100))
    trainer = SimpleNamespace(global_step=1, callback_metrics={"val_grad_norm": torch.tensor(7.0),
                                                               "train/grad_norm": torch.tensor(0.5)})
    hooks.on_train_batch_start(trainer, None, None, 0)
    hooks.on_train_batch_end(trainer, None, torch.tensor(2.25, requires_grad=True), torch.zeros(2, 3), 0)
    trainer.global_step = 2
    hooks.on_train_batch_end(SimpleNamespace(global_step=2), None, {"loss": torch.tensor(float("inf"))},
                             torch.zeros(2, 3), 1)  # no start seen: no step time, never a wrong one
    hooks.on_train_end(None, None)
    first, second = read_probe_file(tmp_path / "p.jsonl")
    assert (first.loss, first.grad_norm) == (2.25, 0.5) and first.step_seconds is not None
    assert second.loss == float("inf") and second.step_seconds is None and second.grad_norm is None


def test_lightning_hooks_with_real_tensors(tmp_path: Path) -> None:
    from dflash_watch.probe.lightning import ProbeHooks

    hooks = ProbeHooks(Probe(tmp_path / "p.jsonl", every_steps=100))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    hooks.on_train_batch_end(SimpleNamespace(global_step=7), None, None,
                             {"input_ids": torch.zeros(2, 4, dtype=torch.long), "attention_mask": mask}, 0)
    hooks.on_train_batch_end(SimpleNamespace(global_step=8), None, None, (torch.zeros(3, 6), torch.zeros(3)), 1)
    hooks.on_train_batch_end(object(), None, None, "not a batch", 2)  # nothing usable: a line with its step
    hooks.on_train_end(None, None)
    lines = _jsonl(tmp_path / "p.jsonl")
    assert [ln["step"] for ln in lines] == [7, 8, 2]
    assert (lines[0]["tokens"], lines[0]["padded_tokens"], lines[0]["batch_size"]) == (6, 8, 2)
    assert (lines[1]["batch_size"], lines[1]["seq_len"]) == (3, 6) and "tokens" not in lines[1]


@pytest.mark.slow
def test_lightning_trainer_fit(tmp_path: Path) -> None:
    """A real Lightning fit (skipped where Lightning is not installed: it is no dependency)."""
    pytest.importorskip("lightning", reason="lightning is not installed (optional; pip install lightning)")
    code = textwrap.dedent(f"""
        import torch, lightning.pytorch as L
        from dflash_watch.probe.lightning import DflashProbeCallback
        class M(L.LightningModule):
            def __init__(self):
                super().__init__(); self.emb = torch.nn.Embedding(16, 4)
            def training_step(self, batch, i):
                return (self.emb(batch["input_ids"]) * batch["attention_mask"][..., None]).sum()
            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)
        rows = [{{"input_ids": torch.ones(6, dtype=torch.long),
                 "attention_mask": torch.tensor([1] * (2 + i % 4) + [0] * (4 - i % 4))}} for i in range(8)]
        cb = DflashProbeCallback(path={str(tmp_path / "p.jsonl")!r}, every_steps=2)
        assert isinstance(cb, L.Callback)
        L.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False, callbacks=[cb]).fit(M(), torch.utils.data.DataLoader(rows, batch_size=2))
""")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = _jsonl(tmp_path / "p.jsonl")
    assert [ln["step"] for ln in lines] == [1, 2, 3, 4]
    assert [(ln["tokens"], ln["padded_tokens"], ln["batch_size"], ln["seq_len"]) for ln in lines] == [
        (5, 12, 2, 6), (9, 12, 2, 6), (5, 12, 2, 6), (9, 12, 2, 6)]
