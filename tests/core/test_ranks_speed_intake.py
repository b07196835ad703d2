"""The many-ranks shortcuts of issue 20, against the plain code one line at a time.

* ``straggler_ranks.take_log_steps`` (the straggler's commit of a quiet run,
  ``Straggler._take``) inlines ``Straggler._progress`` and ``RankState.add``
  for lines without figures. The batching harness cannot see it wrong
  where both of its paths agree, so here it is held to ``_progress`` line
  by line on lines built to reach every branch: ranks in the line, in the
  file name, or none; steps rising, repeated, falling (an eval bar) or
  none; unclocked lines; stamps out of order; ranks that hold figures to
  prune, a heartbeat or a timed-out collective to clear, an open phase, a
  stopped job, and more ranks than ``_MAX_RANKS``.
* ``straggler_hung.next_deadline`` and ``find_hung`` in one pass (each
  judgement, each committed run): the same answers as the rules one by
  one, on random ranks (``tests/core/test_detector_shortcuts.py`` also
  replays every log with the plain rules).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable

import pytest

from dflash_watch.detectors import straggler as straggler_module
from dflash_watch.detectors import straggler_hung as hung
from dflash_watch.detectors import straggler_ranks as ranks_module
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.straggler import Straggler
from dflash_watch.detectors.straggler_ranks import RankState
from dflash_watch.parsers import native
from dflash_watch.parsers.events import Heartbeat, Phase, ProbeSample, Progress
from tests.core.step_runs import snapshot
from tests.core.test_detector_shortcuts import _plain_find_hung


def _lines(rng: random.Random, n: int, t0: float) -> list[Progress]:
    out = []
    t = t0
    for i in range(n):
        t += rng.choice((0.0, 0.5, 1.0, 3.0, -2.0))  # ties and stamps out of order
        rank = rng.randrange(12)
        step = None if rng.random() < 0.08 else int(t) // 2 + rng.choice((0, 0, 1, -3, 5))
        clocked = rng.random() > 0.1
        kind = rng.random()
        if kind < 0.7:
            p = Progress(t, f"train.log:{i}", step=step, rank=rank, clocked=clocked)
        elif kind < 0.85:
            p = Progress(t, f"out/rank{rank}.log:{i}", step=step, clocked=clocked)  # the rank in the file name
        elif kind < 0.95:
            p = Progress(t, f"train.log:{i}", step=step, clocked=clocked)  # no rank at all
        else:
            p = Progress(t, "", step=step, rank=rank, clocked=clocked)  # no source
        out.append(p)
    return out


def _disturb(rng: random.Random, dets: tuple[Straggler, Straggler], t: float) -> None:
    """The same other events to both: figures to prune later, a heartbeat,
    a timed-out collective, a phase, an exit."""
    seed = rng.random()
    for det in dets:
        r = random.Random(seed)
        for rank in r.sample(range(12), 3):
            det.update(ProbeSample(t, rank=rank, step=None, step_seconds=0.5, wait_seconds=0.1,
                                   source=f"probe{rank}:1"))
        rank = r.randrange(12)
        det.update(Heartbeat(t, f"hb{rank}:1", rank=rank, waiting_in="allreduce", last_step=int(t) // 2 + 1))
        if rank in det.ranks:
            det.ranks[rank].timed_out = True
        if r.random() < 0.5:
            det._phase = Phase(t, "train.log:eval", "eval")
        if r.random() < 0.3:
            det._stopped = True


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "python"])
@pytest.mark.parametrize("seed", range(6))
def test_take_log_steps_is_progress_line_by_line(seed: int, kernel: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways of ``take_log_steps``: its loop in C (``rank_steps``, which
    also slides a full cadence window itself) and in Python."""
    monkeypatch.setattr(straggler_module, "_MAX_RANKS", 9)  # ranks 9.. are not followed once 9 are
    if kernel and ranks_module._RANK_STEPS is None:
        pytest.skip(f"no compiled kernels: {native.status()}")
    taken_lines = [0]
    if kernel:
        real = ranks_module._RANK_STEPS

        def counted(*args: object) -> tuple[int, bool, bool]:
            got = real(*args)  # type: ignore[misc]
            taken_lines[0] += got[0]
            return got

        monkeypatch.setattr(ranks_module, "_RANK_STEPS", counted)
    else:
        monkeypatch.setattr(ranks_module, "_RANK_STEPS", None)
    rng = random.Random(seed)
    config = DetectorConfig(straggler_window_s=20.0)
    taken, plain = Straggler(config), Straggler(config)
    t = 1000.0
    for _ in range(40):
        _disturb(rng, (taken, plain), t)
        lines = _lines(rng, rng.choice((1, 5, 64, 200)), t)
        t = max(p.time for p in lines) + 1.0
        taken._take(lines)
        for p in lines:
            plain._progress(p)
        assert snapshot(taken) == snapshot(plain)
    assert len(plain.ranks) == 9
    # The lines reached what they were built for.
    assert any(s.series["wait"] for s in plain.ranks.values()) or any(s.usual_s for s in plain.ranks.values())
    assert sum(len(s.intervals) for s in plain.ranks.values()) > 50
    assert any(len(s.intervals) == s.intervals.maxlen for s in plain.ranks.values())  # a full window slid
    assert (taken_lines[0] > 1000) == kernel


def test_take_log_steps_clears_what_a_step_ends() -> None:
    """A step above the rank's last ends its heartbeat and timed-out
    collective and an open phase; a bar below it (an eval) ends none; any
    step ends a stopped job; figures out of the window are pruned."""
    config = DetectorConfig(straggler_window_s=10.0)
    det = Straggler(config)
    det.update(ProbeSample(0.0, rank=0, step=None, step_seconds=0.5, source="p0:1"))
    det._take([Progress(1.0, "a:1", step=5, rank=0), Progress(2.0, "a:2", step=5, rank=1)])
    det.update(Heartbeat(3.0, "hb:1", rank=0, waiting_in="allreduce"))
    det.ranks[0].timed_out = True
    det._phase = Phase(3.0, "a:eval", "eval")
    det._stopped = True
    det._take([Progress(4.0, "a:3", step=2, rank=0)])  # an eval bar: a sign of life
    s = det.ranks[0]
    assert det._phase is not None and not det._stopped and s.heartbeat is not None and s.timed_out
    assert s.last_seen == 4.0 and s.last_step == 5 and s.series["step"]
    det._take([Progress(20.0, "a:4", step=6, rank=0)])
    assert det._phase is None and s.heartbeat is None and not s.timed_out
    assert s.last_step == 6 and s.last_step_time == 20.0 and s.intervals[-1] == (19.0, 1)
    assert not s.series["step"]  # the probe's figure left the window


def _plain_limit(ranks: list[RankState], config: DetectorConfig, in_phase: bool) -> float:
    timed = [s for s in ranks if s.usual_s is not None]
    busiest = hung.silence_limit(min(timed, key=lambda s: s.usual_s), config) if timed else None
    out = config.straggler_hung_min_s if busiest is None else busiest
    return out + config.straggler_phase_allowance_s if in_phase else out


def _plain_next_deadline(ranks: list[RankState], config: DetectorConfig, in_phase: bool,
                         now: float) -> float | None:
    """``next_deadline`` as it was: the rules one by one."""
    ranks = hung.stepping(ranks)
    if len(ranks) < 2:
        return None
    last = max([s.last_step_time or 0.0 for s in ranks])
    best = last + _plain_limit(ranks, config, in_phase)
    for s in ranks:
        own = hung.silence_limit(s, config)
        if own is not None and s.last_seen is not None and now < s.last_seen + own < best:
            best = s.last_seen + own
    return best if best > now else None


def _random_ranks(rng: random.Random) -> list[RankState]:
    """Ranks that never stepped, without a cadence, never seen, waiting in a
    collective or timed out; ties; now and then a NaN, infinite or zero figure."""
    odd = (float("nan"), float("inf"), 0.0, -0.0)
    ranks = []
    for r in rng.sample(range(100), rng.choice((1, 2, 3, 8, 64))):
        s = RankState(r, 0.0)
        if rng.random() < 0.9:
            s.last_step = rng.choice((0, rng.randrange(100), 50))
            s.last_step_time = rng.choice((None, rng.uniform(0, 300), float(rng.randrange(300))))
        if rng.random() < 0.8:
            s.usual_s = rng.choice((rng.uniform(0.1, 30.0), float(rng.randrange(1, 4)), 5.0))
            s.usual_n = rng.choice((1, 1, 2, 100))
        if rng.random() < 0.9:
            s.last_seen = rng.uniform(0, 300)
        if rng.random() < 0.2:
            s.heartbeat = Heartbeat(0.0, "hb:1", rank=r, waiting_in=rng.choice(("allreduce", "dataloader")))
        s.timed_out = rng.random() < 0.05
        if rng.random() < 0.02:
            setattr(s, rng.choice(("last_step_time", "usual_s", "last_seen")), rng.choice(odd))
        ranks.append(s)
    return ranks


@pytest.mark.parametrize("seed", range(4))
def test_the_hang_rules_in_one_pass_are_the_rules_one_by_one(seed: int) -> None:
    """``next_deadline`` and ``find_hung`` (each judgement, each committed
    run) against the rules one rule at a time, on random ranks, with and
    without a phase, ``now`` before, among and after their times."""
    rng = random.Random(seed)
    config = DetectorConfig()
    found = 0
    for _ in range(3000):
        ranks = _random_ranks(rng)
        now = rng.choice((rng.uniform(0, 400), 100.0, -1.0))
        in_phase = rng.random() < 0.3
        got, want = hung.next_deadline(ranks, config, in_phase, now), _plain_next_deadline(ranks, config, in_phase, now)
        assert got == want or (got != got and want != want), (got, want)
        hit = hung.find_hung(ranks, config, in_phase, now)
        assert hit == _plain_find_hung(ranks, config, in_phase, now, _plain_limit)
        found += hit is not None
    assert found > 100  # the rules found hangs of each kind to compare


class _OwnLine(Progress):
    """A line of another class (of the same layout): left to Python too."""

    __slots__ = ()


class _OwnState(RankState):
    """A rank state of another class: the kernel reads only ``RankState``'s
    own slots, so it leaves such a line to Python."""

    __slots__ = ()


@pytest.mark.skipif(native.KERNELS is None, reason=f"no compiled kernels: {native.status()}")
def test_rank_steps_stops_where_it_cannot_read_and_python_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel stops before a line whose state is not exactly a
    ``RankState`` (or that is not exactly a ``Progress``); the loop in
    Python takes the rest; the state is the Python loop's throughout. A
    replaced ``_interval`` (a test's plain one, a subclass's) is called, not
    inlined."""
    kernels = native.KERNELS
    assert kernels is not None
    calls: list[tuple[float, int]] = []

    def make(rank: int, t: float) -> RankState:
        return _OwnState(rank, t) if rank == 2 else RankState(rank, t)

    lines = [Progress(float(i), f"a:{i}", step=i // 3, rank=i % 3) for i in range(120)]

    def run(kernel: bool) -> tuple[object, tuple[bool, bool], int]:
        ranks: dict[int, RankState] = {}
        for r in (0, 1):
            ranks[r] = make(r, 0.0)
        with monkeypatch.context() as m:
            if not kernel:
                m.setattr(ranks_module, "_RANK_STEPS", None)
            out = ranks_module.take_log_steps(ranks, lines, 60.0, lambda r, t: ranks.setdefault(r, make(r, t)))
        reached = kernels.rank_steps({r: make(r, 0.0) for r in (0, 1, 2)}, lines, ranks_module._LINE_FIELDS, 60.0,
                                     make, ranks_module.rank_of_source)[0]
        return snapshot(ranks), out, reached

    fast, plain = run(True), run(False)
    assert fast[:2] == plain[:2]
    assert fast[2] == 2  # it stopped at the first line of rank 2
    for odd in ("not a line", _OwnLine(2.0, "a:2", step=2, rank=0)):
        got = kernels.rank_steps({}, [Progress(1.0, "a:1", step=1, rank=0), odd], ranks_module._LINE_FIELDS, 60.0,
                                 make, ranks_module.rank_of_source)
        assert got[0] == 1

    real_interval = RankState._interval

    def own_interval(self: RankState, seconds: float, steps: int) -> None:
        calls.append((seconds, steps))
        real_interval(self, seconds, steps)

    monkeypatch.setattr(RankState, "_interval", own_interval)
    ranks = {0: RankState(0, 0.0)}
    ranks_module.take_log_steps(ranks, [Progress(float(i), f"a:{i}", step=i, rank=0) for i in range(40)], 60.0,
                                lambda r, t: None)
    assert len(calls) == 39 and len(ranks[0].intervals) == 16  # each through the method, full windows too


def _both_ways(run: Callable[[], object], monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """``run`` with the kernel (where built) and with the Python loop."""
    fast = run()
    with monkeypatch.context() as m:
        m.setattr(ranks_module, "_RANK_STEPS", None)
        plain = run()
    return fast, plain


@pytest.mark.skipif(native.KERNELS is None, reason=f"no compiled kernels: {native.status()}")
def test_rank_steps_under_callbacks_that_change_things(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a review of the kernel found, each as Python's loop has it:
    a time whose comparison replaces the rank's ``last_seen`` (the old one
    held while compared: no use after free); a ``measured["log"]`` of None
    (fresh, as ``is None`` reads it); ``_interval`` replaced by a call in
    the middle of a run (called from then on, not inlined); the class
    registered again by a call in the middle of a run (the call goes on
    with what it started with)."""
    state = RankState(0, 0.0)

    class Time(float):
        def __gt__(self, other: object) -> bool:
            state.last_seen = None  # the old value's one reference was the slot
            return NotImplemented

    def compare() -> object:
        out = []
        for i in range(50):
            state.last_seen = float(i) + 0.5 + 1e-9 * i
            try:
                ranks_module.take_log_steps({0: state}, [Progress(Time(5.0), "a", step=None, rank=0)], 60.0,
                                            lambda r, t: None)
            except TypeError as e:
                out.append(str(e))
        return out

    fast, plain = _both_ways(compare, monkeypatch)
    assert fast == plain

    def none_counted() -> object:
        s = RankState(0, 0.0)
        s.measured["log"] = None  # type: ignore[assignment]
        flags = ranks_module.take_log_steps({0: s}, [Progress(1.0, "a", step=3, rank=0)], 60.0, lambda r, t: None)
        return flags, s.last_step, s.measured

    fast, plain = _both_ways(none_counted, monkeypatch)
    assert fast == plain == ((True, True), 3, {"log": 3})

    original = RankState._interval

    def replaced_midway() -> object:
        s = RankState(0, 0.0)
        for i in range(20):  # a full window
            s.add(float(i), step=i, window_s=60.0, kind="log")
        calls: list[tuple[float, int]] = []

        def spy(self: RankState, seconds: float, steps: int) -> None:
            calls.append((seconds, steps))
            original(self, seconds, steps)

        def new_rank(rank: int, t: float) -> None:
            monkeypatch.setattr(RankState, "_interval", spy)
            return None

        lines = [Progress(100.0, "a", step=1, rank=9)]
        lines += [Progress(100.0 + 3 * i, "a", step=100 + i, rank=0) for i in range(1, 4)]
        ranks_module.take_log_steps({0: s}, lines, 60.0, new_rank)
        monkeypatch.setattr(RankState, "_interval", original)
        return calls, snapshot(s)

    fast, plain = _both_ways(replaced_midway, monkeypatch)
    assert fast == plain and len(fast[0]) == 3  # type: ignore[index, arg-type]

    kernels = native.KERNELS
    assert kernels is not None

    class Other:
        __slots__ = (*ranks_module._RANK_FIELDS, "a1", "a2", "a3", "n_pad")

        def _interval(self, seconds: float, steps: int) -> None:
            pass

    def registered_midway() -> object:
        ranks = {0: RankState(0, 0.0)}

        def new_rank(rank: int, t: float) -> RankState:
            kernels.set_rank_state(Other, ranks_module._RANK_FIELDS, deque, 16, ranks_module._slid, Other._interval)
            made = ranks[rank] = RankState(rank, t)
            return made

        lines = [Progress(1.0, "a", step=1, rank=1)] + [Progress(2.0 + i, "b", step=2 + i, rank=0) for i in range(20)]
        try:
            return ranks_module.take_log_steps(ranks, lines, 60.0, new_rank), snapshot(ranks)
        finally:
            kernels.set_rank_state(RankState, ranks_module._RANK_FIELDS, deque, ranks_module._INTERVALS_KEPT,
                                   ranks_module._slid, original)

    fast, plain = _both_ways(registered_midway, monkeypatch)
    assert fast == plain
