"""Overhead of the training probe on a small real training step (CPU).

The probe's budget is 1% of a training step (issue 11). This trains a
tiny transformer encoder (2 layers, d=32, batch 8 x 32 tokens, one
thread: a step of a few milliseconds, far smaller than a real GPU step,
so the probe's share here is an upper bound) in alternating rounds with
and without ``Probe.step(batch=ids, attention_mask=mask)`` after each
optimizer step, and prints the median step time of each, their ratio, and
the probe's own cost (timed around each call inside the probed steps, and
alone in a tight loop) in microseconds and as a share of the bare step. Rounds are short (a few steps) and alternate, so that drift of the
machine (a neighbour's load, frequency changes) falls on both kinds; on a
busy machine the ratio of medians still moves by a few percent either
way, and the cost per call is the steadier figure.

    python benchmarks/bench_probe_overhead.py [--rounds 100] [--steps 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100, help="rounds of each kind, alternating")
    parser.add_argument("--steps", type=int, default=5, help="training steps per round")
    parser.add_argument("--every-steps", type=int, default=50, help="probe flush cadence")
    args = parser.parse_args()

    import torch

    from dflash_watch.probe import Probe

    torch.manual_seed(0)
    torch.set_num_threads(1)
    vocab, d, batch, seq = 128, 32, 8, 32
    embed = torch.nn.Embedding(vocab, d)
    layer = torch.nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=128, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    head = torch.nn.Linear(d, vocab)
    params = [*embed.parameters(), *encoder.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    ids = torch.randint(0, vocab, (batch, seq))
    lengths = torch.randint(seq // 4, seq + 1, (batch,))
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()

    def train_step() -> None:
        out = head(encoder(embed(ids), src_key_padding_mask=mask == 0))
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, vocab), ids.reshape(-1), reduction="none")
        loss = (loss * mask.reshape(-1)).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    with tempfile.TemporaryDirectory() as tmp:
        probe = Probe(Path(tmp) / "dflash-probe-rank0.jsonl", every_steps=args.every_steps)

        in_loop: list[float] = []  # the probe call alone, inside the probed steps

        def round_(with_probe: bool) -> list[float]:
            times = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                train_step()
                if with_probe:
                    t1 = time.perf_counter()
                    probe.step(batch=ids, attention_mask=mask)
                    in_loop.append(time.perf_counter() - t1)
                times.append(time.perf_counter() - t0)
            return times

        for _ in range(20):  # warm-up: allocator, autograd caches
            train_step()
        bare: list[float] = []
        probed: list[float] = []
        for r in range(args.rounds):
            for with_probe in ((False, True) if r % 2 == 0 else (True, False)):
                (probed if with_probe else bare).extend(round_(with_probe))
        # The probe's own cost per call, alone (the difference of medians is noisy at this size).
        t0 = time.perf_counter()
        for _ in range(2000):
            probe.step(batch=ids, attention_mask=mask)
        per_call = (time.perf_counter() - t0) / 2000
        probe.close()
        lines = probe.writer.written

    m_bare = statistics.median(bare)
    m_probe = statistics.median(probed)
    print(f"steps per kind: {len(bare)} ({args.rounds} alternating rounds of {args.steps})")
    print(f"median step without probe: {m_bare * 1e3:.3f} ms")
    print(f"median step with probe:    {m_probe * 1e3:.3f} ms")
    print(f"ratio with/without: {m_probe / m_bare:.4f}")
    cost = statistics.fmean(in_loop)  # the mean: flushes are rare spikes, and they count
    print(f"probe.step in the loop: mean {cost * 1e6:.1f} us (flushes included) = "
          f"{cost / m_bare * 100:.2f}% of the bare median step")
    print(f"probe.step alone: {per_call * 1e6:.1f} us per call = {per_call / m_bare * 100:.2f}% of the bare step "
          f"({lines} lines written)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
