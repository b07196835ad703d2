"""The ``loss`` detector: nan, spike, divergence, overflow (CONTRACTS section 4).

Seeded streams of reports; each kind fires once and resolves once, and the
healthy shapes (noise, the warm-up drop, lr-schedule bumps, eval lines, rare
overflows, fp16 warm-up halvings, bf16's constant scale) never fire.
"""

from __future__ import annotations

import doctest
import importlib
import math
import random

import pytest

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.loss import LossDetector, LossState
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.events import Overflow, ProbeSample, ProcessExit, Progress
from dflash_watch.parsers.stream import LogStream

NAN = float("nan")


def _p(t: float, step: int, loss: float | None, **metrics: float) -> Progress:
    return Progress(t, f"train.log:{step}", step=step, loss=loss,
                    metrics=tuple((k.replace("_SP_", " "), v) for k, v in metrics.items()))


def _feed(det: LossDetector, events: list) -> list[Alert]:
    out: list[Alert] = []
    for e in events:
        out += det.update(e)
    return out


def _healthy(n: int, start: float = 0.0, level: float = 2.0, noise: float = 0.05, seed: int = 1,
             dt: float = 10.0, step0: int = 0) -> list[Progress]:
    rng = random.Random(seed)
    return [_p(start + dt * i, step0 + i, level * (1 + rng.gauss(0, noise)), grad_norm=1.0 + rng.random())
            for i in range(n)]


def _kinds(alerts: list[Alert]) -> list[tuple[str | None, str]]:
    return [(a.kind, a.state) for a in alerts]


@pytest.mark.parametrize("name", ["dflash_watch.detectors.loss", "dflash_watch.detectors.loss_robust"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# -- nan ---------------------------------------------------------------------


def test_grad_norm_nan_alone_fires_critical_at_once_and_resolves_after_clean_reports() -> None:
    det = LossDetector()
    out = _feed(det, _healthy(30))
    assert out == []
    # HF's nan filter: the logged loss stays finite (even 0.0) while grad_norm is nan.
    fired = det.update(_p(300.0, 1234, 0.0, grad_norm=NAN))
    assert _kinds(fired) == [("nan", "firing")]
    assert fired[0].severity == "critical"
    assert fired[0].message == "loss is NaN at step 1234 (grad_norm nan)"
    assert _feed(det, [_p(310.0 + i, 1235 + i, 0.0, grad_norm=NAN) for i in range(20)]) == []
    n = DetectorConfig().loss_nan_resolve_reports
    clean = _feed(det, [_p(400.0 + i, 1300 + i, 2.0, grad_norm=1.0) for i in range(n)])
    assert _kinds(clean) == [("nan", "resolved")]
    # The filter's 0.0 losses were no level: 20 min at 2.0 is no divergence.
    assert _feed(det, [_p(500.0 + 10 * i, 1400 + i, 2.0, grad_norm=1.0) for i in range(120)]) == []
    st = det.state()
    assert isinstance(st, LossState) and st.nan_total == 21 and st.loss == 2.0


@pytest.mark.parametrize("loss, grad, word", [(NAN, None, "NaN"), (math.inf, None, "Inf"), (NAN, 1.0, "NaN")])
def test_a_non_finite_loss_fires_with_the_kind_in_the_message(loss: float, grad: float | None, word: str) -> None:
    det = LossDetector()
    ev = Progress(5.0, "x:1", step=7, loss=loss, rank=3, metrics=(("grad_norm", grad),) if grad is not None else ())
    (a,) = det.update(ev)
    assert a.kind == "nan" and a.message.startswith(f"loss is {word} at step 7 on rank 3") and a.rank == 3


def test_megatron_nan_iterations_counter_fires_and_a_single_finite_line_does_not_resolve() -> None:
    det = LossDetector()
    fired = det.update(_p(1.0, 10, 2.3, **{"grad_SP_norm": 1.2, "number_SP_of_SP_nan_SP_iterations": 3.0}))
    assert _kinds(fired) == [("nan", "firing")] and "3 nan iterations" in fired[0].message
    assert det.update(_p(2.0, 20, 2.3, **{"grad_SP_norm": 1.2, "number_SP_of_SP_nan_SP_iterations": 0.0})) == []


def test_probe_samples_fire_nan_on_any_rank() -> None:
    det = LossDetector()
    assert det.update(ProbeSample(1.0, rank=0, step=1, loss=2.0, grad_norm=1.0)) == []
    (a,) = det.update(ProbeSample(2.0, rank=5, step=1, loss=2.0, grad_norm=math.inf))
    assert a.kind == "nan" and a.rank == 5


def test_eval_loss_lines_are_not_the_training_loss() -> None:
    stream = LogStream("train.log")
    text = "".join(f"{{'loss': 2.0, 'grad_norm': 1.0, 'learning_rate': 1e-4, 'epoch': {i / 100}}}\n" for i in range(30))
    text += "{'eval_loss': nan, 'eval_runtime': 1.0, 'epoch': 0.3}\n{'eval_loss': 90.0, 'epoch': 0.3}\n"
    det = LossDetector()
    assert _feed(det, stream.feed(text, 1, 1000.0) + stream.flush(1000.0)) == []


# -- spike ---------------------------------------------------------------------


def test_spike_fires_once_and_resolves_when_back_under_the_level() -> None:
    det = LossDetector()
    events = _healthy(60) + [_p(600.0 + 10 * i, 60 + i, 9.0 + i) for i in range(4)] + _healthy(10, start=640.0, step0=64)
    out = _feed(det, events)
    assert _kinds(out) == [("spike", "firing"), ("spike", "resolved")]
    assert "spiked to 9" in out[0].message and out[0].time == 600.0


def test_a_jump_that_never_comes_back_is_one_spike_then_a_new_level() -> None:
    det = LossDetector()
    events = _healthy(60) + [_p(600.0 + 10 * i, 60 + i, 9.0) for i in range(200)]
    spikes = [k for k in _kinds(_feed(det, events)) if k[0] == "spike"]
    assert spikes == [("spike", "firing"), ("spike", "resolved")]


def test_healthy_noisy_losses_warmup_drop_and_lr_bumps_never_fire() -> None:
    det = LossDetector()
    rng = random.Random(7)
    events: list[Progress] = []
    t = 0.0
    for i in range(3000):
        # Warm-up drop 10.8 -> ~2, then per-step noise (10%), and a bump of
        # 15% lasting 200 steps at each cosine restart.
        base = 2.0 + 8.8 * math.exp(-i / 60)
        bump = 1.15 if (i % 1000) > 900 else 1.0
        events.append(_p(t, i, base * bump * (1 + rng.gauss(0, 0.1)), grad_norm=0.5 + rng.random()))
        t += 1.0
    assert _feed(det, events) == []


def test_a_flat_loss_with_zero_mad_does_not_fire_on_tiny_noise() -> None:
    det = LossDetector()
    events = [_p(float(i), i, 2.0) for i in range(40)] + [_p(40.0, 40, 2.0001), _p(41.0, 41, 2.3)]
    assert _feed(det, events) == []


@pytest.mark.parametrize(("level", "floor"), [
    (2.0, 3.0),  # a share above the median (loss_spike_min_rel 0.5)
    (0.04, 0.09),  # an amount above it (loss_spike_min_abs 0.05)
])
def test_a_flat_loss_spikes_just_above_its_floor_not_at_it(level: float, floor: float) -> None:
    """With MAD 0 the level is the floor: the usual report's shortcut and the
    full judgement read the same one (``LossDetector._spike_floor``)."""
    flat = [_p(float(i), i, level) for i in range(40)]
    det = LossDetector()
    assert _feed(det, [*flat, _p(40.0, 40, floor)]) == []
    det = LossDetector()
    assert _feed(det, [*flat, _p(40.0, 40, floor * 1.01)]) == []  # one report: not confirmed yet
    fired = _feed(det, [_p(41.0, 41, floor * 1.01)])
    assert _kinds(fired) == [("spike", "firing")]
    assert fired[0].time == 41.0 and "at step 40" in fired[0].message  # confirmed at 41, began at 40


def test_one_outlier_report_is_no_spike_two_in_a_row_are_and_a_far_one_at_once() -> None:
    """A small batch's per-step loss has outliers: one report above the
    level, the next back under, is noise (``loss_spike_confirm_reports``).
    Two in a row fire, told from the first; one three times as far above
    the median as the level fires at once."""
    base = _healthy(60, noise=0.02)
    outlier = [_p(600.0, 60, 3.5), *_healthy(20, start=610.0, step0=61, seed=2, noise=0.02)]
    det = LossDetector()
    assert _feed(det, base + outlier) == [] and det._above_in_row == 0
    det = LossDetector()
    two = _feed(det, base + [_p(600.0, 60, 3.5), _p(610.0, 61, 3.4)])
    assert _kinds(two) == [("spike", "firing")] and two[0].time == 610.0
    assert "spiked to 3.5 at step 60" in two[0].message and two[0].source == "train.log:60"
    det = LossDetector()
    assert _kinds(_feed(det, base + [_p(600.0, 60, 40.0)])) == [("spike", "firing")]
    det = LossDetector(DetectorConfig(loss_spike_confirm_reports=1))
    assert _kinds(_feed(det, base + [_p(600.0, 60, 3.5)])) == [("spike", "firing")]


@pytest.mark.parametrize("every", [10, None])
def test_one_report_of_many_steps_far_up_is_a_spike_told_at_the_next(every: int | None) -> None:
    """A report every 10 steps (an average: Megatron, HF) or of no known
    step, once above the level and back at the next: a spike, fired at the
    next report (which says it was no single step), told from the report
    above, and resolved at the one after."""
    rng = random.Random(3)

    def p(i: int, loss: float) -> Progress:
        return Progress(10.0 * i, f"train.log:{i}", step=None if every is None else every * i, loss=loss)

    events = [p(i, 2.0 * (1 + rng.gauss(0, 0.02))) for i in range(60)] + [p(60, 3.5), p(61, 2.0), p(62, 2.01)]
    out = _feed(LossDetector(), events)
    assert _kinds(out) == [("spike", "firing"), ("spike", "resolved")]
    assert out[0].time == 610.0 and out[0].source == "train.log:60" and out[1].time == 620.0
    once = _feed(LossDetector(DetectorConfig(loss_spike_resolve_reports=1)), events)
    assert _kinds(once) == [("spike", "firing"), ("spike", "resolved")] and once[1].time == 610.0
    assert once[1].message == "loss back under its level: 2 < 2.977"


# -- divergence ----------------------------------------------------------------


def test_divergence_fires_after_minutes_above_the_minimum_and_resolves_when_it_comes_down() -> None:
    det = LossDetector()
    events = _healthy(60)  # 10 min at 2.0
    # A slow climb to 3.2 (no spike: 1% a report), held, then back down.
    events += [_p(600.0 + 10 * i, 60 + i, 2.0 * (1 + 0.01 * min(i, 60))) for i in range(1, 91)]
    events += [_p(1500.0 + 10 * i, 150 + i, 2.0) for i in range(30)]
    out = _feed(det, events)
    assert _kinds(out) == [("divergence", "firing"), ("divergence", "resolved")]
    firing = out[0]
    # 30% above the minimum from about report 60+30+5 (smoothing), then 300 s.
    assert 1500.0 > firing.time >= 600.0 + 300.0
    assert "diverging" in firing.message


def test_a_divergence_that_runs_away_escalates_to_critical_once() -> None:
    """A runaway learning rate: the loss climbs on and on (a review's real
    run: 0.2 to 76). Past ``loss_divergence_critical_factor`` times its
    minimum the warning is resolved as escalated and one critical fires;
    it comes down, and that one resolves."""
    det = LossDetector()
    events = _healthy(60)  # 10 min at 2.0
    events += [_p(600.0 + 10 * i, 60 + i, 2.0 * 1.02 ** i) for i in range(1, 181)]  # up 2% a report: 71x
    events += [_p(2500.0 + 10 * i, 300 + i, 2.0) for i in range(30)]
    out = _feed(det, events)
    kinds = [(a.kind, a.state, a.severity) for a in out]
    assert kinds == [("divergence", "firing", "warning"), ("divergence", "resolved", "warning"),
                     ("divergence", "firing", "critical"), ("divergence", "resolved", "critical")], kinds
    assert "escalated" in out[1].message and out[1].time == out[2].time
    assert "diverged" in out[2].message and "10x its recent minimum" in out[2].message
    assert out[2].evidence["smoothed"] >= 10 * out[2].evidence["minimum"]


def test_a_divergence_already_that_far_fires_critical_at_once() -> None:
    det = LossDetector()
    events = _healthy(60) + [_p(600.0 + 10 * i, 60 + i, 30.0 + 0.01 * i) for i in range(1, 60)]
    out = [a for a in _feed(det, events) if a.kind == "divergence"]
    assert [(a.state, a.severity) for a in out] == [("firing", "critical")]
    det = LossDetector(DetectorConfig(loss_divergence_critical_factor=100.0))
    out = [a for a in _feed(det, events) if a.kind == "divergence"]
    assert [(a.state, a.severity) for a in out] == [("firing", "warning")]


def test_a_short_bump_above_the_margin_is_no_divergence() -> None:
    det = LossDetector()
    events = _healthy(60) + [_p(600.0 + 10 * i, 60 + i, 2.8) for i in range(20)] + _healthy(30, start=800.0, step0=80)
    # 2.8 is 40% above the minimum, for 200 s (< loss_divergence_s).
    assert [k for k in _kinds(_feed(det, events)) if k[0] == "divergence"] == []


# -- overflow ------------------------------------------------------------------


def _steps_with_overflows(n: int, every: int, start_step: int = 0, t0: float = 0.0, scale: float = 65536.0) -> list:
    out: list = []
    for i in range(n):
        s = start_step + i
        if every and i % every == 0:
            out.append(Overflow(t0 + i, f"ds.log:{s}", rank=0, scale=scale, new_scale=scale / 2))
        out.append(_p(t0 + i + 0.5, s, 2.0))
    return out


def test_overflow_storm_fires_once_and_resolves_when_overflows_are_rare_again() -> None:
    det = LossDetector()
    events = _steps_with_overflows(100, 0) + _steps_with_overflows(80, 1, 100, 100.0, scale=1024.0)
    events += _steps_with_overflows(100, 0, 180, 180.0)
    out = _feed(det, events)
    assert _kinds(out) == [("overflow", "firing"), ("overflow", "resolved")]
    assert "skipped" in out[0].message


def test_fp16_warmup_halvings_and_rare_overflows_never_fire() -> None:
    det = LossDetector()
    # Megatron/DeepSpeed warm-up: 16 overflows in a row from 2^32 at the start.
    events: list = []
    scale = 2.0**32
    for i in range(16):
        events.append(Overflow(float(i), f"ds.log:{i}", rank=0, scale=scale, new_scale=scale / 2))
        scale /= 2
        events.append(_p(i + 0.5, i, 10.0))
    # Then one overflow every 300 steps for 3000 steps.
    events += _steps_with_overflows(3000, 300, 16, 16.0, scale=scale)
    assert _feed(det, events) == []


def test_overflows_in_another_ranks_file_are_not_the_followed_lane() -> None:
    """apex's overflow line names no rank: in a ``torchrun --redirects``
    file it is that file's rank's. A storm on rank 1's file while rank 0's
    lane is followed is not counted (as a line with ``rank=1`` would not be)."""
    def storm(rank: int) -> list:
        out: list = []
        for i in range(80):
            out.append(Overflow(20.0 + i, f"attempt_0/{rank}/stdout.log:{2 * i}", scale=1024.0, new_scale=512.0))
            out.append(Progress(20.5 + i, f"attempt_0/{rank}/stdout.log:{2 * i + 1}", step=10 + i, loss=2.0))
        return out

    det = LossDetector()
    assert _feed(det, _rank_file(0, 0.0, [2.0] * 10) + storm(1)) == [] and det.state().overflow_total == 0
    assert _kinds(_feed(LossDetector(), _rank_file(0, 0.0, [2.0] * 10) + storm(0))) == [("overflow", "firing")]


def test_a_single_overflow_never_fires() -> None:
    det = LossDetector()
    assert det.update(Overflow(1.0, "ds.log:1", rank=0, scale=65536.0, new_scale=32768.0)) == []
    assert det.state().overflow_total == 1


def test_scale_at_floor_fires_but_bf16_constant_scale_of_one_does_not() -> None:
    det = LossDetector()
    bf16 = [_p(float(i), i, 2.0, loss_SP_scale=1.0) for i in range(100)]
    assert _feed(det, bf16) == []
    det = LossDetector()
    fp16 = [_p(float(i), i, 2.0, loss_SP_scale=65536.0 / 2 ** min(i, 16)) for i in range(17)]
    out = _feed(det, fp16)
    assert _kinds(out) == [("overflow", "firing")] and "loss scale fell to 1" in out[0].message


def test_megatron_skipped_iterations_counter_on_most_reports_fires() -> None:
    det = LossDetector()
    key = "number_SP_of_SP_skipped_SP_iterations"
    warm = [_p(10.0 * i, 10 * i, 2.0, **{key: 3.0 if i == 1 else 0.0}) for i in range(1, 20)]
    assert _feed(det, warm) == []
    storm = [_p(200.0 + 10 * i, 200 + 10 * i, 2.0, **{key: 9.0}) for i in range(6)]
    assert _kinds(_feed(det, storm)) == [("overflow", "firing")]


def test_deepspeed_cumulative_skipped_counter() -> None:
    det = LossDetector()
    ok = [_p(float(i), 10 * i, None, skipped=16.0) for i in range(1, 20)]
    assert _feed(det, ok) == []  # warm-up's 16, then never again
    storm = [_p(20.0 + i, 200 + 10 * i, None, skipped=16.0 + 8 * i) for i in range(1, 10)]
    assert _kinds(_feed(det, storm)) == [("overflow", "firing")]


def test_the_skipped_ratio_is_the_last_counted_reports() -> None:
    """``state().skipped_ratio``: skipped over all iterations as the last
    counted report left them, a copy of the numbers: a relaunch (which
    starts a new ledger) does not change it until the new run reports."""
    det = LossDetector()
    assert det.state().skipped_ratio is None
    events: list = []
    for i in range(1, 11):
        if i % 5 == 0:
            events.append(Overflow(i - 0.5, f"ds.log:{i}", rank=0, scale=1024.0, new_scale=512.0))
        events.append(_p(float(i), i, 2.0))
    assert _feed(det, events) == []
    assert det.state().skipped_ratio == pytest.approx(2 / 10)
    det.update(ProcessExit(20.0, "crash"))
    assert det.state().skipped_ratio == pytest.approx(2 / 10)
    det.update(_p(30.0, 1, 2.0))
    assert det.state().skipped_ratio == 0.0


# -- lanes, relaunch, the set ----------------------------------------------------


def test_other_ranks_losses_do_not_feed_the_spike_level() -> None:
    det = LossDetector()
    events = []
    for i in range(60):
        events.append(Progress(float(i), f"l:{i}", step=i, loss=2.0, rank=0))
        events.append(Progress(float(i), f"l:{i}", step=i, loss=6.0, rank=1))  # another rank's own loss
    assert _feed(det, events) == []


def _rank_file(rank: int, start: float, losses: list[float]) -> list[Progress]:
    """A rank's lines in its own ``torchrun --redirects`` file: no rank prefix."""
    return [Progress(start + i, f"attempt_0/{rank}/stdout.log:{i + 1}", step=i + 1, loss=loss)
            for i, loss in enumerate(losses)]


def per_rank_files() -> list[Progress]:
    """Rank 1's file, then rank 0's: the same losses, run down from 0.32 to 0.001."""
    down = [0.32 * 0.9 ** i for i in range(60)]
    return _rank_file(1, 1000.0, down) + _rank_file(0, 1100.0, down)


def test_per_rank_files_follow_the_lowest_rank_and_a_later_lower_rank_starts_again() -> None:
    """Replay of ``torchrun --redirects`` files: rank 1's file read first
    (older), its loss run down to 0.001, then rank 0's from 0.32 again. Its
    file's rank is the lane (``rank_of_source``), and rank 0 appearing
    starts the levels again: no spike at rank 0's step 1, by either path."""
    events = per_rank_files()
    det = LossDetector()
    assert _feed(det, events) == [] and det._lane == 0
    # The same lanes without file ranks: one series stepping up from 0.001 to 0.32 (the old false spike).
    plain = [Progress(e.time, f"stdout.log:{i}", step=e.step, loss=e.loss) for i, e in enumerate(events)]
    assert "spike" in [a.kind for a in _feed(LossDetector(), plain)]


def test_a_lower_rank_appearing_resolves_an_open_spike_and_says_why() -> None:
    det = LossDetector()
    events = [Progress(float(i), f"l:{i}", step=i, loss=2.0, rank=3) for i in range(40)]
    events.append(Progress(40.0, "l:40", step=40, loss=9.0, rank=3))
    fired = _feed(det, events)
    assert _kinds(fired) == [("spike", "firing")] and fired[0].rank == 3
    moved = det.update(Progress(41.0, "l:41", step=1, loss=0.5, rank=1))
    assert _kinds(moved) == [("spike", "resolved")]
    assert "rank 1 reports: its loss is followed from here" in moved[0].message
    assert det._lane == 1 and _feed(det, [Progress(42.0 + i, "l", step=2 + i, loss=0.5, rank=1) for i in range(30)]) == []


def test_a_relaunch_starts_the_levels_again() -> None:
    det = LossDetector()
    _feed(det, _healthy(60))
    assert det.update(ProcessExit(700.0, "crash")) == []
    # The new run starts from 10.8 again: no spike, no divergence.
    assert _feed(det, [_p(800.0 + 10 * i, i, 10.8 - 0.1 * i) for i in range(60)]) == []


def test_registered_in_the_set_with_its_state() -> None:
    ds = DetectorSet(build_detectors())
    assert ds.get("loss") is not None
    ds.update(_p(1.0, 1, 2.5, grad_norm=0.7))
    st = ds.loss_state()
    assert st is not None and st.loss == 2.5 and st.grad_norm == 0.7 and st.time == 1.0
    assert [a.kind for a in ds.update(_p(2.0, 2, NAN))] == ["nan"]
