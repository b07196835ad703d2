"""A torch.compile'd training loop whose batch shapes keep changing.

    TORCH_LOGS=recompiles python scripts/realruns/compile_recompiles.py > compile_recompiles.log 2>&1
    TORCH_LOGS=recompiles python scripts/realruns/compile_recompiles.py --fail-on-limit > compile_recompile_limit_fatal.log 2>&1

The model is compiled with ``dynamic=False`` (as people do to keep
static-shape kernels) and the sequence length changes with every few steps,
as it does when length bucketing breaks: every new length is a recompile
(``TORCH_LOGS=recompiles`` prints each with its guard failure) until dynamo
hits ``recompile_limit`` and warns that it falls back to eager for that
frame; training goes on. With ``--fail-on-limit``
(``torch._dynamo.config.fail_on_recompile_limit_hit``) hitting the limit is
fatal instead. ``--backend eager`` (the default here) keeps it seconds on
a CPU: the recompiles and their messages are dynamo's, whatever backend.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from _tiny import VOCAB, seed_everything


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 32)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, VOCAB))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        h = h + h.cumsum(1) / ids.shape[1]
        return self.mlp(h)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--limit", type=int, default=8, help="torch._dynamo.config.recompile_limit (8 is the default)")
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--fail-on-limit", action="store_true")
    a = ap.parse_args()
    seed_everything(0)
    torch._dynamo.config.recompile_limit = a.limit
    torch._dynamo.config.fail_on_recompile_limit_hit = a.fail_on_limit
    model = Tiny()
    step_fn = torch.compile(model, backend=a.backend, dynamic=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    batch = 8
    lengths = [64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416]
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        seq = lengths[(step // 4) % len(lengths)]
        ids = torch.randint(0, VOCAB, (batch, seq + 1), generator=g)
        logits = step_fn(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        print(f"step {step}/{a.steps} | loss {loss.item():.4f} | seq {seq} | dt {dt * 1000:.1f}ms | tok/s {batch * seq / dt:,.0f}", flush=True)


if __name__ == "__main__":
    main()
