"""The ``loss`` detector's batching contract (issue 20, ``detectors/loss_steps.py``).

A run of step lines taken at once must leave the detector exactly as the
lines one at a time (``tests.core.step_runs.compare_runs``: alerts,
deadline and the whole state after every run), on every fixture, shared,
speed and random log, on seeded streams of every kind the detector judges,
and on runs built at the edges of each proof: a loss at its spike floor or
early level, a smoothed loss at its divergence margin (each -1e-9, at,
+1e-9), windows filling, episodes open, out-of-order times, ranks, skip and
scale figures. An ask changes nothing, taken or not.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.loss import LossDetector
from dflash_watch.parsers.events import Crash, Event, Overflow, ProcessExit, Progress
from tests.core.step_runs import all_log_events, compare_runs, snapshot

LOGS = dict(all_log_events())
NAN = float("nan")


def _make(**knobs: float) -> Callable[[], LossDetector]:
    return lambda: LossDetector(DetectorConfig(**knobs))  # type: ignore[arg-type]


def _p(t: float, step: int | None, loss: float | None, rank: int | None = None, **metrics: float) -> Progress:
    return Progress(t, f"train.log:{step}", step=step, loss=loss, rank=rank,
                    metrics=tuple((k.replace("_SP_", " "), v) for k, v in metrics.items()))


def _fed(events: Sequence[Event], **knobs: float) -> LossDetector:
    det = _make(**knobs)()
    for e in events:
        det.update(e)
    return det


def _taken(det: LossDetector, run: Sequence[Progress]) -> bool:
    """Whether ``det`` takes ``run`` at once; the ask itself changes nothing."""
    before = snapshot(det)
    commit = det.quiet_steps(run)
    assert snapshot(det) == before, "the ask changed the detector"
    return commit is not None


def _same(events: Sequence[Event], seeds: Sequence[int] = (1, 2, 3, 4), **knobs: float) -> tuple[int, int]:
    offered = taken = 0
    for seed in seeds:
        o, t = compare_runs(_make(**knobs), events, seed=seed, label=f"seed {seed}")
        offered += o
        taken += t
    return offered, taken


def _flat(n: int, loss: float = 2.0, t0: float = 0.0, dt: float = 1.0, step0: int = 0) -> list[Progress]:
    return [_p(t0 + dt * i, step0 + i, loss, grad_norm=1.0) for i in range(n)]


# -- every log -----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(LOGS))
def test_every_log_gives_the_per_step_path(name: str) -> None:
    _same(LOGS[name], seeds=(1, 2, 3))


def test_a_run_after_one_report_above_the_level_is_judged_report_by_report() -> None:
    """A single step's outlier above the level waits for the next report
    (``loss_spike_confirm_reports``): the run after it is not taken at
    once, so the next report decides it, and a later lone outlier is no
    "second in a row"."""
    rng = random.Random(5)
    flat = [_p(float(i), i, 2.0 * (1 + rng.gauss(0, 0.02)), grad_norm=1.0) for i in range(200)]
    events = flat[:60] + [_p(60.0, 60, 3.5, grad_norm=1.0)] + flat[61:150] + [_p(150.0, 150, 3.5, grad_norm=1.0)]
    events += flat[151:]
    det = _fed(events)
    assert not det.episodes["spike"].active and det._above_in_row == 0 and det._level is None
    det = _fed(events[:61])
    assert det._above_in_row == 1 and _taken(det, events[61:70]) is False
    offered, taken = _same(events)
    assert 0 < taken < offered


def test_per_rank_files_give_the_per_step_path_and_the_move_to_a_lower_rank_is_not_taken() -> None:
    """``torchrun --redirects`` files (no rank prefix: the file's rank):
    runs of either file are taken, a run in which rank 0 first appears
    after rank 1 is not (its levels start again, one report at a time)."""
    from tests.core.test_detector_loss import per_rank_files

    events = per_rank_files()
    offered, taken = _same(events)
    assert 0 < taken < offered
    det = _fed(events[:60])
    assert det._lane == 1 and _taken(det, events[56:64]) is False and _taken(det, events[50:58]) is True


@pytest.mark.parametrize("shape", ["speed-progress", "speed-ranks", "speed-legacy", "speed-nan"])
def test_speed_shapes_are_taken(shape: str) -> None:
    """The point of it: a steady training log is taken, not fed line by line."""
    offered, taken = _same(LOGS[shape], seeds=(5, 6))
    assert offered > 50 and taken >= 0.9 * offered, (offered, taken)


@pytest.mark.parametrize("name", ["speed-progress", "speed-ranks", "speed-nan", "random-1", "random-3"])
def test_an_ask_changes_nothing(name: str) -> None:
    """Asked before every run and never committed: the state stays as fed."""
    det = LossDetector()
    events = LOGS[name]
    rng = random.Random(7)
    i = 0
    while i < len(events):
        j = i
        while j < len(events) and type(events[j]) is Progress and j - i < rng.choice((2, 5, 64, 300)):
            j += 1
        if j - i >= 2:
            _taken(det, events[i:j])  # type: ignore[arg-type]
        for e in events[i:max(j, i + 1)]:
            det.update(e)
        i = max(j, i + 1)


# -- seeded streams of every kind ------------------------------------------------

def _stream(seed: int, n: int = 500) -> list[Event]:
    """Reports of every shape the detector reads: noise, spikes, slow rises,
    NaN, ranks (one lane), lines without a loss, skip counters, loss scales,
    overflow lines, relaunches, copies of a step and times that step back."""
    rng = random.Random(seed)
    out: list[Event] = []
    t, step, level = 1000.0, 0, 2.0 + rng.random()
    ranks = rng.choice([(None,), (0,), (3, 1, 2), (0, 1, 2, 3, 4, 5, 6, 7)])
    total_skipped = 0.0
    for _ in range(n):
        t += rng.choice((0.5, 1.0, 1.0, 2.0, 30.0, 120.0)) if rng.random() > 0.02 else -3.0
        step += rng.choice((1, 1, 1, 0, 2, -5)) if rng.random() < 0.1 else 1
        r = rng.random()
        if r < 0.003:
            out.append(ProcessExit(t, "crash"))
            continue
        if r < 0.006:
            out.append(Crash(t, "log", "crash", "exception", "RuntimeError", "boom", "sig"))
            continue
        if r < 0.015:
            out.append(Overflow(t, "log", rank=rng.choice(ranks), scale=2.0 ** rng.randrange(0, 17),
                                new_scale=2.0 ** rng.randrange(0, 16)))
            continue
        if rng.random() < 0.01:
            level *= rng.choice((0.5, 1.4, 2.0))  # a new level: a rise or a drop
        loss: float | None = level * (1 + rng.gauss(0, 0.05))
        if rng.random() < 0.01:
            loss = rng.choice((NAN, float("inf"), 0.0, -0.0, -1.0, level * 5))
        metrics: dict[str, float] = {}
        shape = rng.random()
        if shape < 0.5:
            metrics["grad_norm"] = 1.0 + rng.random() if rng.random() > 0.01 else NAN
        elif shape < 0.6:
            metrics["loss_SP_scale"] = rng.choice((65536.0, 32768.0, 1.0, 2.0))
            metrics["number_SP_of_SP_skipped_SP_iterations"] = float(rng.random() < 0.05)
            metrics["number_SP_of_SP_nan_SP_iterations"] = float(rng.random() < 0.01)
        elif shape < 0.65:
            total_skipped += rng.random() < 0.05
            metrics["skipped"] = total_skipped
        elif shape < 0.7:
            metrics["lr"] = 1e-4
            loss = None if rng.random() < 0.5 else loss
        if rng.random() < 0.03:
            loss = None
        out.append(_p(t, step if rng.random() > 0.02 else None, loss, rank=rng.choice(ranks), **metrics))
    return out


@pytest.mark.parametrize("seed", range(24))
def test_seeded_streams_give_the_per_step_path(seed: int) -> None:
    _same(_stream(seed), seeds=(seed, seed + 100))


def test_seeded_streams_under_other_knobs() -> None:
    """An odd smooth window (a median of one value), a short minimum span
    (points leave it inside a run), a spike window shorter than the reports
    it needs (values leave before any median), a fallen-scale floor."""
    for seed in range(6):
        _same(_stream(seed), seeds=(seed,), loss_smooth_reports=5, loss_divergence_window_s=20.0,
              loss_divergence_s=5.0)
        _same(_stream(seed), seeds=(seed,), loss_spike_min_reports=60, loss_spike_window=50,
              loss_overflow_scale_floor=2.0)


def test_steady_streams_are_taken() -> None:
    """Noise, no events: every run but those of the first reports is taken."""
    rng = random.Random(3)
    events = [_p(float(i), i, 2.0 * (1 + rng.gauss(0, 0.05)), grad_norm=1.0) for i in range(3000)]
    offered, taken = _same(events)
    assert taken >= 0.95 * offered, (offered, taken)


# -- the spike floor ---------------------------------------------------------------

@pytest.mark.parametrize(("eps", "quiet"), [(-1e-9, True), (0.0, True), (1e-9, False)])
def test_a_loss_at_the_spike_floor(eps: float, quiet: bool) -> None:
    """A flat 2.0: the floor is 2.0 + max(0.5 x 2.0, 0.05) = 3.0 (and the MAD
    is 0: above the floor is a spike)."""
    base = _flat(60)
    run = _flat(10, t0=60.0, step0=60)
    run[4] = _p(64.0, 64, 3.0 + eps, grad_norm=1.0)
    assert _taken(_fed(base), run) is quiet
    _same([*base, *run, *_flat(40, t0=70.0, step0=70)])


@pytest.mark.parametrize(("eps", "quiet"), [(-1e-9, True), (0.0, True), (1e-9, False)])
def test_a_loss_at_the_early_level(eps: float, quiet: bool) -> None:
    """Before 20 reports: a spike is a loss over max(2 x highest, highest + 0.05) = 4.0."""
    base = _flat(5)
    run = _flat(6, t0=5.0, step0=5)
    run[3] = _p(8.0, 8, 4.0 + eps, grad_norm=1.0)
    assert _taken(_fed(base), run) is quiet
    _same([*base, *run, *_flat(40, t0=11.0, step0=11)])


@pytest.mark.parametrize("fed", [0, 1, 9, 10, 15, 19, 20, 21, 49, 50, 51])
def test_windows_filling(fed: int) -> None:
    """Runs that start before, at and after the windows fill (10 smoothed,
    20 for a median, 50 held), some crossing from the early test to the median."""
    rng = random.Random(fed)
    events = [_p(float(i), i, 2.0 * (1 + rng.gauss(0, 0.05)), grad_norm=1.0) for i in range(fed + 40)]
    assert _taken(_fed(events[:fed]), events[fed:fed + 12])  # type: ignore[arg-type]
    _same(events)


def test_a_first_loss_of_zero_and_signed_zeros() -> None:
    """HF's NaN filter logs 0.0: no level from it, and 0.0/-0.0 sort alike:
    such runs go one at a time."""
    events = [_p(float(i), i, (0.0, -0.0, 2.0)[i % 3], grad_norm=1.0) for i in range(80)]
    assert not _taken(_fed(events[:30]), events[30:40])  # type: ignore[arg-type]
    _same(events)


# -- the divergence margin --------------------------------------------------------

@pytest.mark.parametrize(("eps", "quiet"), [(-1e-9, True), (0.0, True), (1e-9, False)])
def test_a_smoothed_loss_at_the_divergence_margin(eps: float, quiet: bool) -> None:
    """A minimum of 2.0, then a flat loss right at 2.0 + 0.3 x 2.0 (+1e-12): the
    smoothed loss (a median of equal values) is that loss exactly. Above it
    for 30 s a rise starts (taken: it cannot fire yet); for 330 s it fires."""
    c = DetectorConfig()
    margin = 2.0 + c.loss_divergence_margin * abs(2.0) + 1e-12
    base = _flat(60)
    run = _flat(30, loss=margin + eps, t0=60.0, step0=60)
    assert _taken(_fed(base), run)
    assert _taken(_fed(base), _flat(330, loss=margin + eps, t0=60.0, step0=60)) is quiet
    _same([*base, *run, *_flat(600, loss=margin + eps, t0=90.0, step0=90)])


def test_a_sustained_rise_fires_and_resolves_alike() -> None:
    """Divergence fires after minutes above the margin, then the loss comes
    back: the runs inside it go one at a time, the same alerts come out."""
    events = [*_flat(100), *_flat(600, loss=3.0, t0=100.0, step0=100), *_flat(400, t0=700.0, step0=700)]
    offered, taken = _same(events)
    assert 0 < taken < offered


def test_a_minimum_that_leaves_its_span_inside_a_run() -> None:
    """With a 5 s span the sliding minimum drops points in the middle of a run."""
    rng = random.Random(4)
    events = [_p(0.7 * i, i, 2.0 + 0.2 * rng.random(), grad_norm=1.0) for i in range(600)]
    offered, taken = _same(events, loss_divergence_window_s=5.0)
    assert taken > 0.5 * offered


def test_times_out_of_order() -> None:
    """A lane whose times step back inside a run: the sliding minimum's drops
    depend on each add's time; runs taken or not, the state is the same."""
    rng = random.Random(5)
    events = [_p(float(i) + rng.choice((0.0, 0.0, -2.5, 3.0)), i, 2.0 + 0.2 * rng.random(), grad_norm=1.0)
              for i in range(800)]
    _same(events, loss_divergence_window_s=4.0)
    _same(events)


# -- episodes open ----------------------------------------------------------------

def test_an_open_nan_episode_goes_one_at_a_time_until_resolved() -> None:
    base = [*_flat(30), _p(30.0, 30, 2.0, grad_norm=NAN)]
    run = _flat(12, t0=31.0, step0=31)
    assert not _taken(_fed(base), run)
    events = [*base, *_flat(200, t0=31.0, step0=31)]
    offered, taken = _same(events)
    assert 0 < taken < offered


def _nan_line(t: float, step: int | None, kind: int, rank: int | None = None) -> Progress:
    """A report after the weights went bad, of each kind a log writes."""
    if kind == 0:  # HF's step line: loss and grad norm nan
        return _p(t, step, NAN, rank, grad_norm=NAN, lr=1e-4)
    if kind == 1:  # HF's NaN filter: a finite average, the grad norm nan
        return _p(t, step, 0.0, rank, grad_norm=NAN)
    if kind == 2:  # a tqdm bar's loss=nan
        return _p(t, step, NAN, rank)
    if kind == 3:  # inf, not nan
        return _p(t, step, float("inf"), rank, grad_norm=float("inf"))
    if kind == 4:  # Megatron's counter, the loss scale above its floor
        return _p(t, step, NAN, rank, number_SP_of_SP_nan_SP_iterations=3.0, loss_SP_scale=1024.0)
    if kind == 5:  # a bare rate line: no report
        return _p(t, step, None, rank)
    return _p(t, step, None, rank, lr=1e-4)  # a learning rate only: no report


def test_an_open_nan_episode_that_stays_nan_is_taken_in_runs() -> None:
    """Weights gone bad, the run going on for hours: every report NaN again.
    The episode is open and no report is clean, so none fires or resolves:
    runs are taken, counting each report (``nan_total``, the skip ledger)."""
    rng = random.Random(11)
    base = [*_flat(60), _p(60.0, 60, NAN, grad_norm=NAN)]
    for kind in range(7):
        run = [_nan_line(61.0 + i, 61 + i, kind) for i in range(12)]
        det = _fed(base)
        assert _taken(det, run), kind
        commit = det.quiet_steps(run)
        assert commit is not None
        commit()
        assert det.state().nan_total == 1 + (12 if kind < 5 else 0), kind
    events: list[Event] = list(base)
    for i in range(3000):
        events.append(_nan_line(61.0 + i, 61 + i - (50 if rng.random() < 0.01 else 0), rng.randrange(7)))
        if rng.random() < 0.002:  # a relaunch: the levels start again, the NaN stays open
            events.append(ProcessExit(61.5 + i, "crash"))
    offered, taken = _same(events)
    assert taken >= 0.9 * offered, (offered, taken)


def test_an_open_nan_episode_goes_one_at_a_time_where_it_could_change() -> None:
    """One clean report (towards resolving), a skipped step or a scale at its
    floor (an overflow judged), a ranked run's lower rank: one at a time
    where a report would change the episode's course, the same either way."""
    base = [*_flat(60), _p(60.0, 60, NAN, grad_norm=NAN)]
    nan_run = [_nan_line(61.0 + i, 61 + i, 0) for i in range(12)]
    clean = [*nan_run[:5], _p(66.0, 66, 2.0, grad_norm=1.0), *nan_run[6:]]
    assert not _taken(_fed(base), clean)
    skipped = [*nan_run[:5], _p(66.0, 66, NAN, number_SP_of_SP_skipped_SP_iterations=1.0), *nan_run[6:]]
    assert not _taken(_fed(base), skipped)
    floor = [*nan_run[:5], _p(66.0, 66, NAN, loss_SP_scale=1.0), *nan_run[6:]]
    assert not _taken(_fed(base), floor)
    events: list[Event] = [*base, *clean, *skipped, *floor]
    rng = random.Random(12)
    for i in range(2000):
        t = 100.0 + i
        if rng.random() < 0.01:
            events.append(_p(t, 100 + i, 2.0, grad_norm=1.0))  # clean: may resolve after a few in a row
        elif rng.random() < 0.005:
            events.append(Overflow(t, "log", scale=2.0, new_scale=1.0))
        else:
            events.append(_nan_line(t, 100 + i, rng.randrange(7), rank=rng.choice((None, 3, 3, 3, 1))))
    _same(events)


def test_an_open_spike_goes_one_at_a_time() -> None:
    base = [*_flat(60), _p(60.0, 60, 20.0, grad_norm=1.0)]
    assert not _taken(_fed(base), _flat(5, t0=61.0, step0=61))
    _same([*base, *_flat(200, t0=61.0, step0=61)])
    _same([*base, *_flat(200, loss=20.0, t0=61.0, step0=61)])  # stuck up: a new level


def test_an_overflow_storm_goes_one_at_a_time() -> None:
    storm: list[Event] = []
    for i in range(60):
        storm.append(Overflow(100.0 + i, "log", scale=2.0 ** (16 - i % 16), new_scale=2.0 ** (15 - i % 16)))
        storm.append(_p(100.0 + i + 0.5, 100 + i, 2.0, grad_norm=1.0))
    base = [*_flat(100), *storm]
    assert not _taken(_fed(base), _flat(5, t0=200.0, step0=200))
    _same([*base, *_flat(300, t0=200.0, step0=200)])


def test_a_pending_overflow_or_a_fallen_scale_goes_one_at_a_time() -> None:
    base: list[Event] = [*_flat(60), Overflow(60.0, "log", scale=4.0, new_scale=2.0)]
    assert not _taken(_fed(base), _flat(5, t0=61.0, step0=61))
    scaled = [_p(float(i), i, 2.0, loss_scale=4.0) for i in range(60)]
    falls = [_p(60.0 + i, 60 + i, 2.0, loss_scale=4.0 if i < 3 else 1.0) for i in range(6)]
    assert _taken(_fed(scaled), scaled[:6])
    assert not _taken(_fed(scaled), falls)  # to its floor: judged report by report
    _same([*scaled, *falls, *_flat(100, t0=66.0, step0=66)])
    _same([*base, Overflow(60.5, "log", scale=2.0, new_scale=1.0), *falls, *_flat(100, t0=66.0, step0=66)])


def test_relaunches_start_the_levels_again() -> None:
    events: list[Event] = []
    for k in range(4):
        events += _flat(80, t0=1000.0 * k, step0=0)
        events.append(ProcessExit(1000.0 * k + 90, "crash") if k % 2 else
                      Crash(1000.0 * k + 90, "log", "crash", "exception", "RuntimeError", "boom", "sig"))
    _same(events)


# -- what a report carries -----------------------------------------------------------

@pytest.mark.parametrize(("skipped", "quiet"), [(0.0, True), (1.0, False)])
def test_megatron_counters_and_scales(skipped: float, quiet: bool) -> None:
    """Megatron's per-interval counters and its loss scale (above the floor)."""
    def line(i: int, skip: float = 0.0) -> Progress:
        return _p(float(i), i * 10, 2.0, loss_SP_scale=65536.0, grad_SP_norm=1.0,
                  number_SP_of_SP_skipped_SP_iterations=skip, number_SP_of_SP_nan_SP_iterations=0.0)

    base = [line(i) for i in range(60)]
    run = [line(60 + i, skipped if i == 2 else 0.0) for i in range(6)]
    assert _taken(_fed(base), run) is quiet
    _same([*base, *run, *(line(66 + i) for i in range(100))])


@pytest.mark.parametrize(("step", "quiet"), [(0.0, True), (1.0, False)])
def test_deepspeed_cumulative_skips(step: float, quiet: bool) -> None:
    base = [_p(float(i), i, 2.0, skipped=3.0) for i in range(60)]
    run = [_p(60.0 + i, 60 + i, 2.0, skipped=3.0 + step * (i >= 3)) for i in range(6)]
    assert _taken(_fed(base), run) is quiet
    _same([*base, *run, *(_p(66.0 + i, 66 + i, 2.0, skipped=4.0) for i in range(100))])
    # A counter that is no number goes one at a time (where the per-report
    # path would raise on it, it still does).
    odd = [_p(60.0 + i, 60 + i, 2.0, skipped=float("inf") if i == 3 else 3.0) for i in range(6)]
    assert not _taken(_fed(base), odd)


def test_lines_without_a_loss() -> None:
    """Grad-norm-only lines (clean reports, no level), learning-rate-only and
    bare rate lines (no reports at all), copies of a step and steps back."""
    rng = random.Random(8)
    events = []
    for i in range(600):
        kind = rng.random()
        loss = 2.0 + 0.1 * rng.random()
        if kind < 0.2:
            events.append(_p(float(i), i, None, grad_norm=1.0))
        elif kind < 0.3:
            events.append(_p(float(i), i, None, lr=1e-4))
        elif kind < 0.4:
            events.append(_p(float(i), None, None))
        elif kind < 0.5:
            events.append(_p(float(i), i // 2, loss))
        else:
            events.append(_p(float(i), i if rng.random() > 0.1 else i - 50, loss, grad_norm=1.0, lr=1e-4))
    offered, taken = _same(events)
    assert taken > 0.5 * offered


def test_a_nan_figure_goes_one_at_a_time() -> None:
    """A NaN learning rate costs the shortcut, nothing else."""
    base = _flat(60)
    run = [_p(60.0 + i, 60 + i, 2.0, grad_norm=1.0, lr=NAN if i == 2 else 1e-4) for i in range(6)]
    assert not _taken(_fed(base), run)
    _same([*base, *run, *_flat(40, t0=66.0, step0=66)])


def test_ranks_follow_one_lane() -> None:
    """Many ranks, one lane (the lowest): a lower rank that shows up inside a
    run takes the lane from there on."""
    rng = random.Random(9)
    events = []
    ranks = [5, 6, 7]
    for i in range(2000):
        if i == 700:
            ranks.append(2)
        if i == 1400:
            ranks.append(0)
        r = rng.choice(ranks)
        events.append(_p(i / 8, i // 8, 2.0 + 0.3 * r + 0.1 * rng.random(), rank=r, grad_norm=1.0))
    offered, taken = _same(events)
    assert taken > 0.8 * offered
    mixed = [_p(float(i), i, 2.0 + 0.1 * rng.random(), rank=rng.choice((None, 1, 2))) for i in range(600)]
    _same(mixed)


def test_baseline_is_not_the_loss_detectors() -> None:
    """The loss detector judges against no good run's figure: a baseline set
    changes nothing, runs taken or not."""
    det = _fed(_flat(60))
    before = snapshot(det)
    det.set_baseline(123.0)
    assert snapshot(det) == before
    assert _taken(det, _flat(10, t0=60.0, step0=60))
