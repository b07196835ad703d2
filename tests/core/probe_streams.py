"""Seeded synthetic probe lines (CONTRACTS section 9) for the detector tests.

A ``ProbeProfile`` says how a run's batches and counters behave over time
(seconds after the stream start); ``probes`` turns it into time-ordered
``ProbeSample`` events, one per step per rank, with the jitter real ranks
show (tokens per batch vary, ranks stamp a few ms apart).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dflash_watch.parsers.events import ProbeSample
from tests.core.synthetic import T0, Scenario


@dataclass(frozen=True, slots=True)
class ProbeProfile:
    ranks: int = 2
    interval_s: float = 5.0
    padded_tokens: int = 49152
    efficiency: float = 0.93
    # (start_s, end_s or None, efficiency) stretches: broken batching.
    padding_drops: tuple[tuple[float, float | None, float], ...] = ()
    # Allocator retries per step per rank on ``thrash_ranks`` between the times.
    thrash: tuple[float, float | None] | None = None
    thrash_ranks: tuple[int, ...] = (0,)
    thrash_every_steps: int = 2
    # Recompiles: one every ``recompile_every_s`` between the times, every rank.
    recompile: tuple[float, float | None] | None = None
    recompile_every_s: float = 60.0
    warmup_recompiles: int = 12  # in the first minutes, as a run compiles
    # Relaunches: every counter starts again from 0.
    relaunch_at_s: tuple[float, ...] = ()
    # Report allocator figures at all (a CPU run has none).
    cuda: bool = True


def _within(t: float, span: tuple[float, float | None] | None) -> bool:
    return span is not None and t >= span[0] and (span[1] is None or t < span[1])


def probes(p: ProbeProfile, duration_s: float, *, seed: int = 0, t0: float = T0) -> Scenario:
    rng = np.random.default_rng(seed)
    events: list[ProbeSample] = []
    retries = [0] * p.ranks
    recompiles = [0] * p.ranks
    next_recompile = [p.recompile[0] if p.recompile else 0.0] * p.ranks
    relaunches = list(p.relaunch_at_s)
    step = 0
    t = 0.0
    while t < duration_s:
        if relaunches and t >= relaunches[0]:
            relaunches.pop(0)
            retries = [0] * p.ranks
            recompiles = [0] * p.ranks
            step = 0
        eff = p.efficiency
        for start, end, value in p.padding_drops:
            if _within(t, (start, end)):
                eff = value
        for rank in range(p.ranks):
            padded = int(p.padded_tokens * rng.uniform(0.8, 1.0))
            tokens = int(padded * min(1.0, max(0.0, eff + rng.normal(0.0, 0.01))))
            if _within(t, p.thrash) and rank in p.thrash_ranks and step % p.thrash_every_steps == 0:
                retries[rank] += 1
            if step < p.warmup_recompiles:
                recompiles[rank] += 1
            elif _within(t, p.recompile) and t >= next_recompile[rank]:
                recompiles[rank] += 1
                next_recompile[rank] = t + p.recompile_every_s
            events.append(ProbeSample(
                t0 + t + rank * 0.003, rank=rank, step=step, tokens=tokens, padded_tokens=padded,
                alloc_retries=retries[rank] if p.cuda else None, recompiles=recompiles[rank],
                source=f"dflash-probe-rank{rank}.jsonl",
            ))
        step += 1
        t += p.interval_s
    return Scenario(events, [])
