"""A plain DDP training loop on gloo where rank 1 dies at step N.

Launched the way users do, output captured whole:
    torchrun --nproc_per_node=2 scripts/realruns/ddp_rank_dies.py > torchrun_ddp_rank_dies.log 2>&1
    torchrun --nproc_per_node=2 --tee 3 scripts/realruns/ddp_rank_dies.py > torchrun_ddp_rank_dies_tee.log 2>&1
    torchrun --nproc_per_node=2 scripts/realruns/ddp_rank_dies.py --record > torchrun_ddp_rank_dies_record.log 2>&1
    torchrun --nproc_per_node=2 --tee 3 scripts/realruns/ddp_rank_dies.py --print --die-rank 0 > torchrun_ddp_print_buffered.log 2>&1

Every rank logs its progress (timestamped, as most training scripts set up
logging). Rank 1 raises a RuntimeError at ``--die-step``; rank 0 is then
inside the next all-reduce, so gloo fails under it ("Connection closed by
peer") or torchrun's SIGTERM takes it: the log holds the root cause, the
sibling's own error and elastic's ChildFailedError report. With
``--record`` main() is wrapped in elastic's ``@record`` (as the torchrun docs
ask), so that report quotes the root cause's exception and traceback.
With ``--print`` the step lines are print()ed to stdout (no stamp), as
many scripts do: block-buffered where stdout is a file, they reach the log
at the rank's exit, after its traceback (stderr, unbuffered).
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from _tiny import SEQ, VOCAB, seed_everything
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", action="store_true", help="wrap the training in elastic's @record")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--die-step", type=int, default=25)
    ap.add_argument("--pace", type=float, default=0.05)
    ap.add_argument("--print", action="store_true", help="print the step lines to stdout (no logging, no stamp)")
    ap.add_argument("--die-rank", type=int, default=1)
    a = ap.parse_args()
    (record(train) if a.record else train)(a)


def train(a: argparse.Namespace) -> None:
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s [rank{rank}] %(levelname)s %(name)s: %(message)s",
    )
    log = logging.getLogger("train")
    dist.init_process_group("gloo")
    seed_everything(0)
    model = DDP(
        torch.nn.Sequential(
            torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, VOCAB)
        )
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    batch = 8
    log.info("world size %d, %d steps", world, a.steps)
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        ids = torch.randint(0, VOCAB, (batch, SEQ), generator=g)
        if rank == a.die_rank and step == a.die_step:
            raise RuntimeError(f"rank {rank}: bad shard file data/shard-00017.bin (truncated record at offset 1048576)")
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        took = time.perf_counter() - t0
        if took < a.pace:
            time.sleep(a.pace - took)
            took = a.pace
        if a.print:
            print(f"step {step}/{a.steps} | loss {loss.item():.4f} | {batch * SEQ * world / took:.0f} tok/s")
        else:
            log.info("step %d/%d loss %.4f tok/s %.0f", step, a.steps, loss.item(), batch * SEQ * world / took)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
