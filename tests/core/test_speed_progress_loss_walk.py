"""``loss_steps._walk_margin`` on a noisy loss longer than the minimum's span (issue 20).

The walk makes ``SlidingMin.add``'s moves on a copy of the deque itself
(no call per report): the points older than ``loss_divergence_window_s``
must leave it, and the newer ones under a new value, exactly as the
detector's own minimum drops them. A noisy loss reported every 5 s for
hours has its smoothed value now and then above the margin (the walk
runs) while the minimum's front points expire inside the runs. Held to
the per-step path (alerts, deadlines, whole state).
"""

from __future__ import annotations

import random

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.parsers.events import Progress
from tests.core.test_quiet_steps_loss import _same


def _p(t: float, step: int, loss: float) -> Progress:
    return Progress(t, f"train.log:{step}", step=step, loss=loss, metrics=(("grad_norm", 1.0),))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_noisy_loss_for_hours_keeps_the_minimum_of_its_span(seed: int) -> None:
    span = DetectorConfig().loss_divergence_window_s
    rng = random.Random(seed)
    dt = 5.0
    n = int(3 * span / dt)
    # A slow drift under the noise: old low points must leave, not linger.
    events = [_p(dt * i, i, 2.3 + 0.3 * ((i * dt) % span) / span + rng.random()) for i in range(n)]
    offered, taken = _same(events, seeds=(seed,))
    assert taken > 0.5 * offered, (offered, taken)
