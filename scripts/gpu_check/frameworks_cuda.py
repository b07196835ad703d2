"""The probe inside real frameworks on CUDA, for the GPU check.

    python scripts/gpu_check/frameworks_cuda.py PART OUT_DIR [--device cuda]

PART is one of:

- ``compile``: a ``torch.compile``'d loop (inductor on CUDA, ``dynamic=False``)
  whose sequence length changes every few steps, as when length bucketing
  breaks: each new length recompiles until ``recompile_limit``. Run it with
  ``TORCH_LOGS=recompiles`` so dynamo prints each; the probe counts them.
- ``hf``: a tiny Llama (from its config) under the HF Trainer on the GPU,
  with ``DflashProbeCallback``.
- ``lightning``: a Lightning fit on the GPU with its ``DflashProbeCallback``.

Each writes its probe lines to ``OUT_DIR/dflash-probe-rank0.jsonl`` and its
output to stdout/stderr (the log).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "realruns"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _tiny import VOCAB, TokenDataset, seed_everything, tiny_llama, trainer_args  # noqa: E402
from compile_recompiles import Tiny  # noqa: E402  (the CPU run's model, the same loop)


def compile_loop(out: str, device: str, backend: str, steps: int, mode: str | None = None) -> None:
    from dflash_watch.probe import Probe

    seed_everything(0)
    torch._dynamo.config.recompile_limit = 4

    model = Tiny().to(device)
    step_fn = torch.compile(model, backend=backend, dynamic=False, mode=mode)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    probe = Probe(os.path.join(out, "dflash-probe-rank0.jsonl"), rank=0, every_steps=4)
    lengths = [64, 96, 128, 160, 192, 224, 256]
    batch = 8
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        seq = lengths[(step // 3) % len(lengths)]
        ids = torch.randint(0, VOCAB, (batch, seq + 1), device=device)
        logits = step_fn(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        value = loss.detach().item()
        dt = time.perf_counter() - t0
        probe.step(ids, step=step, loss=value, step_seconds=dt)
        print(f"step {step}/{steps} | loss {value:.4f} | seq {seq} | dt {dt * 1000:.1f}ms | tok/s {batch * seq / dt:,.0f}",
              flush=True)
    probe.close()


def hf(out: str, device: str, steps: int) -> None:
    seed_everything()
    from transformers import Trainer

    from dflash_watch.probe.hf import DflashProbeCallback

    args = trainer_args(os.path.join(out, "trainer"), steps, logging_steps=5, use_cpu=device == "cpu")
    trainer = Trainer(model=tiny_llama(), args=args, train_dataset=TokenDataset(8 * steps),
                      callbacks=[DflashProbeCallback(path=os.path.join(out, "dflash-probe-rank0.jsonl"),
                                                     every_steps=5)])
    trainer.train()
    print(f"trained on {trainer.args.device}")


def lightning(out: str, device: str, steps: int) -> None:
    import lightning.pytorch as L

    from dflash_watch.probe.lightning import DflashProbeCallback

    class M(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(VOCAB, 32)
            self.head = torch.nn.Linear(32, VOCAB)

        def training_step(self, batch: dict[str, torch.Tensor], i: int) -> torch.Tensor:
            ids = batch["input_ids"]
            logits = self.head(self.emb(ids[:, :-1]))
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    seed_everything()
    cb = DflashProbeCallback(path=os.path.join(out, "dflash-probe-rank0.jsonl"), every_steps=5)
    trainer = L.Trainer(max_steps=steps, accelerator="gpu" if device == "cuda" else "cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, callbacks=[cb])
    trainer.fit(M(), torch.utils.data.DataLoader(TokenDataset(8 * steps), batch_size=8))
    print(f"trained on {trainer.strategy.root_device}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=("compile", "hf", "lightning"))
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default="inductor", help="compile only")
    ap.add_argument("--mode", default=None, help="compile only: torch.compile's mode (reduce-overhead: cudagraphs)")
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.part == "compile":
        compile_loop(a.out, a.device, a.backend, a.steps, a.mode)
    elif a.part == "hf":
        hf(a.out, a.device, a.steps)
    else:
        lightning(a.out, a.device, a.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
