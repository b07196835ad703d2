"""The ``health`` scene of the demo: a NaN loss, a straggler and a failing GPU on the healthy run.

``python -m dflash_watch.demo.simulator --scene health`` (``dflash-watch demo
--scene health``) plays the seed's story as usual and, during the first
launch, adds what the training-health detectors (issue 19)
are for, in the formats a real run writes them:

- a straggler: the drafter ranks 0-2 (GPUs 5-7) write probe lines
  (``dflash-probe-rank{r}.jsonl``, CONTRACTS section 9) with their step
  split, and every ``RANK_LINE_EVERY`` steps each of them prints a
  rank-prefixed line ``[rank2]: step N/50000 | compute 2.81s | wait 0.09s``;
  from ``SLOW_FROM_S`` rank 2 computes 1.6x longer and the others wait on it;
- a NaN loss: from ``NAN_FROM_S`` for ``NAN_STEPS`` steps the progress line
  logs ``loss nan`` and rank 0's probe line a NaN loss and grad norm;
- a failing GPU: every sample carries temperature and power; GPU 6 heats
  up from ``HEAT_FROM_S``, throttles (``thermal``) and at ``XID_AT_S`` reports
  Xid 48 (a double-bit ECC error) and an uncorrected ECC error.

The relaunch (incarnation 2) is healthy, as in the story. Times are seconds
after launch on the simulated clock; nothing here reads a clock.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator

from dflash_watch.demo.story import Schedule, Step, Story

SCENES = ("story", "health")
DRAFTER_RANK_GPUS = (5, 6, 7)
SLOW_RANK = 2
RANK_LINE_EVERY = 10
SLOW_FROM_S = 240.0
NAN_FROM_S = 600.0
NAN_STEPS = 6
HOT_GPU = 6
HEAT_FROM_S = 420.0
THROTTLE_FROM_S = 520.0
XID_AT_S = 700.0
XID_CODE = 48
POWER_LIMIT_W = 700.0


def active(scene: str, incarnation: int) -> bool:
    return scene == "health" and incarnation == 1


def nan_steps(story: Story, schedule: Schedule) -> frozenset[int]:
    """The indices of the steps whose loss is NaN: the first ``NAN_STEPS`` ending after ``NAN_FROM_S``."""
    out = [s.index for s in schedule if s.end >= NAN_FROM_S and s.end < story.broken_at]
    return frozenset(out[:NAN_STEPS])


def loss_text(step: Step, nan: frozenset[int]) -> str:
    return "nan" if step.index in nan else f"{step.loss:.3f}"


def split(step: Step, rank: int, story: Story) -> tuple[float, float, float]:
    """(step, compute, wait) seconds of one rank's step.

    Under DDP every rank takes the step's wall time; what differs is the
    split: a healthy rank computes 62% of it and waits the rest in the
    all-reduce; once rank 2 is slow it computes nearly all of it and the
    others wait on it.
    """
    total = round(story.tokens_per_step / max(step.tokens_per_s, 1.0), 3)
    compute = 0.62 * total
    if rank == SLOW_RANK and step.end >= SLOW_FROM_S:
        compute = 0.97 * total
    return total, round(compute, 3), round(total - compute, 3)


def rank_line(step: Step, rank: int, story: Story) -> str:
    """A rank-prefixed step line, as torchrun's ``--tee`` / ``[rankN]:`` prefixes print them.

    Every ``RANK_LINE_EVERY`` steps, not every step: the straggler detector
    takes one report per rank and step, the first to arrive, and the log
    line (no split) would then hide the probe line's split of that step.

    The split only, no step time: a step time reads as an it/s rate, and
    two more rates per step beside rank 0's tok/s would blur the
    throughput drop the story is about. The step seconds are in the
    ranks' probe lines."""
    _, compute, wait = split(step, rank, story)
    return f"[rank{rank}]: step {step.index}/{story.total_steps} | compute {compute:.2f}s | wait {wait:.2f}s\n"


def rank_probe_lines(story: Story, schedule: Schedule, start: float, nan: frozenset[int]) -> Iterator[tuple[float, int, str]]:
    """(time, rank, JSON line) of the per-rank probe lines, one per rank and step until the crash."""
    for step in schedule:
        for rank in range(len(DRAFTER_RANK_GPUS)):
            total, compute, wait = split(step, rank, story)
            line: dict[str, object] = {"time": round(start + step.end, 3), "rank": rank, "step": step.index,
                                       "step_seconds": total, "compute_seconds": compute, "wait_seconds": wait}
            if rank == 0:
                bad = step.index in nan
                line["loss"] = math.nan if bad else round(step.loss, 4)
                line["grad_norm"] = math.nan if bad else 0.84
            yield start + step.end, rank, json.dumps(line) + "\n"  # NaN as JSON's NaN, as json.dumps writes it


def gpu_health_fields(gpu: int, k: float, rng: random.Random) -> dict[str, object]:
    """The health reads of one GPU sample ``k`` seconds after launch."""
    temp = 58.0 + gpu + rng.random() * 2
    power = 540.0 + rng.random() * 40
    fields: dict[str, object] = {"power_limit_w": POWER_LIMIT_W, "throttle": [], "ecc_uncorrected": 0}
    if gpu == HOT_GPU and k >= HEAT_FROM_S:
        heat = min(1.0, (k - HEAT_FROM_S) / (THROTTLE_FROM_S - HEAT_FROM_S))
        temp = 66.0 + 26.0 * heat + rng.random()
        if k >= THROTTLE_FROM_S:
            fields["throttle"] = ["thermal"]
            power = 420.0 + rng.random() * 20
        if k >= XID_AT_S:
            fields["ecc_uncorrected"] = 1
            if k == XID_AT_S:
                fields["xid"] = [XID_CODE]
    fields["temp_c"] = round(temp, 1)
    fields["power_w"] = round(power, 1)
    return fields
