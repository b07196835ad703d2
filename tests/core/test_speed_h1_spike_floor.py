"""The loss spike floor's first look, against the per-step path (issue 20).

``loss_steps._under_spike_floor`` proves every loss of a run under the
spike level it would be judged against. It first looks at the level over
the least value the exact ``low`` can be (the least of the window and the
run): a run under that is under every level, with no sort of the window
and the run. Held to the per-step path (``tests.core.step_runs``) on
seeded streams built to reach both looks and their edges: a flat median
(the least is ``low``), a jump up (the run's least over the window's),
losses a hair under, at and over each floor, spikes.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from dflash_watch.detectors.base import Detector
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.loss import LossDetector
from dflash_watch.parsers.events import Event, Progress
from tests.core.step_runs import compare_runs


def _step(t: float, step: int, loss: float | None = None) -> Progress:
    return Progress(t, f"train.log:{step}", step=step, loss=loss, metrics=(("grad_norm", 1.0),))


def _spike_stream(seed: int) -> list[Event]:
    """Segments of a loss: flat to the bit or noisy at a level, then a jump
    up (under the divergence margin) where the run's least is over the
    window's, with losses at the spike floor over the window's median and
    over the run's least (a hair under, at or over it) and a few spikes:
    the first look clears some runs, the exact ``low`` others, some fire."""
    rng = random.Random(seed)
    out: list[Event] = []
    level = 2.0
    while len(out) < 1500:
        noise = rng.choice((0.0, 0.0, 0.03))
        for _ in range(rng.randrange(30, 90)):
            loss = level * (1 + rng.gauss(0, noise))
            if rng.random() < 0.03:
                loss = level * 1.5 + rng.choice((-5e-10, 0.0, 5e-10))  # the floor over a flat median
            out.append(_step(float(len(out)), len(out), loss))
        high = level * rng.choice((1.1, 1.2, 1.25))
        for _ in range(rng.randrange(5, 30)):
            loss = high
            r = rng.random()
            if r < 0.1:
                loss = level * 1.5 * (1 + rng.choice((-1e-9, 0.0, 1e-9, 0.02)))  # over the window's median
            elif r < 0.2:
                loss = high * 1.5 * (1 + rng.choice((-1e-9, 0.0, 0.02)))  # over the run's least
            elif r < 0.22:
                loss = level * 3.0
            out.append(_step(float(len(out)), len(out), loss))
        level *= rng.choice((0.8, 1.0, 1.1))
    return out


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("knobs", [{}, {"loss_spike_min_reports": 5, "loss_spike_window": 12},
                                   {"loss_spike_min_rel": 0.01, "loss_spike_min_abs": 0.2}])
def test_loss_spike_floor_runs_give_the_per_step_path(seed: int, knobs: dict[str, float]) -> None:
    make: Callable[[], Detector] = lambda: LossDetector(DetectorConfig(**knobs))  # type: ignore[arg-type]  # noqa: E731
    offered, taken = compare_runs(make, _spike_stream(seed), seed=seed, label=f"spikes {seed} {knobs}")
    assert offered and taken, (offered, taken)
