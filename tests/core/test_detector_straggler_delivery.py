"""straggler: ranks whose lines arrive late and in bursts are judged on the same steps.

Live, each rank's probe file is read once a poll, in turn, and a loaded
watcher reads them late: at 60x (the demo) a poll is a minute of data time.
The demo's ``health`` scene then showed the slow alert resolve while the
throughput fell (every rank's step seconds ramp from 2.9 to 15 s within a
minute) and fire again at "computes 15 s per step": the late rank's median
was taken over earlier, shorter steps than the others'. Here the scene's
shape is replayed with the ranks' lines delivered in bursts: rank 2 stays
the one straggler throughout, one alert, never resolved.
"""

from __future__ import annotations

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.straggler import Straggler
from dflash_watch.parsers.events import ProbeSample

SLOW = 2
LINE_EVERY_S = 3.0  # the scene's ranks write a line per step, about every 3 s


def _step_seconds(t: float) -> float:
    """2.9 s steps until 500 s, then the throughput falls: 15.5 s within 40 s."""
    return 2.9 if t < 500.0 else min(15.5, 2.9 + 12.6 * (t - 500.0) / 40.0)


def _line(rank: int, t: float, step: int) -> ProbeSample:
    """The scene's split: the slow rank computes 97% of the step, the others 62% and wait the rest."""
    total = round(_step_seconds(t), 3)
    compute = round((0.97 if rank == SLOW else 0.62) * total, 3)
    return ProbeSample(t, rank=rank, step=step, step_seconds=total, compute_seconds=compute,
                       wait_seconds=round(total - compute, 3), source=f"dflash-probe-rank{rank}.jsonl:{step}")


def _delivered(poll_s: float, phases: dict[int, float]) -> list[ProbeSample]:
    """The three ranks' lines over 1000 s, in the order they arrive: a rank
    in ``phases`` is read every ``poll_s`` (offset by its phase, a fraction
    of the poll), its lines since the last read at once; the others as written."""
    arrivals: list[tuple[float, int, ProbeSample]] = []
    for step in range(1, 334):
        t = step * LINE_EVERY_S
        for rank in range(3):
            arrive = t
            if rank in phases:
                phase = phases[rank] * poll_s
                arrive = ((t - phase) // poll_s + 1) * poll_s + phase
            arrivals.append((arrive, rank, _line(rank, t, step)))
    arrivals.sort(key=lambda a: (a[0], a[1]))
    return [line for _, _, line in arrivals]


def _slow_alerts(lines: list[ProbeSample]) -> list[tuple[str, int | None]]:
    det = Straggler(DetectorConfig())
    out = []
    for line in lines:
        out += det.update(line)
    return [(a.state, a.rank) for a in out if a.kind == "slow"]


def test_in_time_order_the_slow_rank_fires_once() -> None:
    assert _slow_alerts(_delivered(30.0, {})) == [("firing", SLOW)]


@pytest.mark.parametrize(("poll_s", "phases"), [
    (15.0, {SLOW: 0.0}),  # the slow rank's file read late
    (30.0, {SLOW: 0.0}),
    (45.0, {0: 0.0, SLOW: 0.0}),
    # every file read in turn, the slow rank's last: the ranks ahead have
    # already let go of the start of the stretch the late one is judged on
    (30.0, {0: 0.0, 1: 0.33, SLOW: 0.67}),
    (45.0, {1: 0.0, 0: 0.33, SLOW: 0.67}),
])
def test_late_bursty_lines_of_one_rank_neither_resolve_nor_refire(poll_s: float, phases: dict[int, float]) -> None:
    assert _slow_alerts(_delivered(poll_s, phases)) == [("firing", SLOW)]


def test_the_ranks_panel_compares_the_same_steps_as_the_alert() -> None:
    """Every rank's row is over the stretch the alert judges: while rank 2's
    lines come late and the steps lengthen, its compute stays 0.97/0.62 of
    the others' (the scene's split of one step), never an earlier step's."""
    det = Straggler(DetectorConfig())
    ratios = []
    for line in _delivered(30.0, {SLOW: 0.0}):
        det.update(line)
        rows = {row.rank: row for row in det.rank_table()}
        fast, slow = rows[0].compute_seconds, rows[SLOW].compute_seconds if SLOW in rows else None
        if fast is not None and slow is not None:
            ratios.append(slow / fast)
    assert len(ratios) > 300
    assert min(ratios) == pytest.approx(0.97 / 0.62, rel=0.01) and max(ratios) == pytest.approx(0.97 / 0.62, rel=0.01)
