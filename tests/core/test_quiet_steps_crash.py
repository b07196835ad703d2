"""crash and fx_tracing batching (issue 20, ``CrashDetector.quiet_steps``)
against their per-step path.

The two detectors share one record of the step lines (``StepLines``), as
``build_detectors`` makes them, so they are compared as the pair a set holds:
fed in the set's order (fx_tracing, then crash), both asked before either
commits. Every log the project has is fed one step at a time and in offered
runs; alerts, deadlines and the whole state must match
(``tests.core.step_runs``). Then the edges of the proof (a step at a held
incident's deadline -1e-9/0/+1e-9, a known caught traceback whose proof
would pull its deadline into the run, a watched stream, unsorted times, a
NaN time, the same event twice), the record itself against a plain one
line at a time (its lazy working-in is the same on both paths, so the
differential alone cannot see it wrong), and last that the speed logs' runs
are taken, so that the fast path cannot quietly become "always None".
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence

import pytest

from dflash_watch.detectors.base import Alert, DetectorBase, Handler, StepCommit
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.crash import CrashDetector
from dflash_watch.detectors.crash_steps import LINES_KEEP, PENDING_MAX, STREAMS_MAX, StepLines
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.events import Crash, Event, Frame, Progress, Tick
from tests.core.step_runs import LOG_COUNT, all_log_events, compare_runs, snapshot

T0 = 1_764_410_400.0


class _Pair(DetectorBase):
    """fx_tracing and crash on one ``StepLines``, as one detector for the
    harness: each event to fx_tracing then crash (the set's order), a run
    asked of both before either commits (``DetectorSet.take_steps``)."""

    accepts = CrashDetector.accepts
    timed = True
    name = "crash_pair"

    def __init__(self) -> None:
        config = DetectorConfig(tz="UTC")
        steps = StepLines()
        self.fx = CrashDetector(config, name="fx_tracing", steps=steps)
        self.crash = CrashDetector(config, name="crash", steps=steps)

    def routes(self) -> Mapping[type[Event], Handler]:
        first, second = self.fx.routes(), self.crash.routes()

        def both(event: Event) -> list[Alert]:
            return first[type(event)](event) + second[type(event)](event)

        return {etype: both for etype in self.accepts}

    def update(self, event: Event) -> list[Alert]:
        return self.fx.update(event) + self.crash.update(event)

    def deadline(self) -> float | None:
        due = [d for d in (self.fx.deadline(), self.crash.deadline()) if d is not None]
        return min(due, default=None)

    def flush(self) -> list[Alert]:
        return self.fx.flush() + self.crash.flush()

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        first = self.fx.quiet_steps(steps)
        if first is None:
            return None
        second = self.crash.quiet_steps(steps)
        if second is None:
            return None

        def commit() -> None:
            first()
            second()

        return commit


@pytest.mark.parametrize("index", range(LOG_COUNT))
def test_every_log_batched_as_one_at_a_time(index: int) -> None:
    name, events = all_log_events()[index]
    # (The long speed logs once here: test_speed_logs_runs_are_taken feeds
    # two of them again with another seed.)
    for seed in (1,) if name.startswith("speed-") else (1, 2, 3):
        compare_runs(_Pair, events, seed=seed, label=f"{name} seed {seed}")


# -- the edges of the proof -------------------------------------------------------

def _steps(n: int, t0: float, first_step: int = 0, first_line: int = 1, rank: int | None = 0,
           every: float = 1.0, file: str = "train.log") -> list[Progress]:
    return [Progress(t0 + every * i, f"{file}:{first_line + i}", step=first_step + i, rank=rank)
            for i in range(n)]


def _tb(t: float, line: int, detector: str = "crash", rank: int | None = 0) -> Crash:
    """A Python traceback with frames: ``crash`` waits to see whether it was survived."""
    return Crash(t, f"train.log:{line}", detector, "exception" if detector == "crash" else "fx_tracing",
                 "RuntimeError", "boom", f"RuntimeError@train.py:10|{detector}", rank=rank,
                 frames=(Frame("train.py", 10, "step"),))


def _at(t: float, ulps: int) -> float:
    """``t`` moved by ``ulps`` units in the last place (the nearest floats)."""
    for _ in range(abs(ulps)):
        t = math.nextafter(t, math.copysign(math.inf, ulps))
    return t


def _fed(events: Sequence[Event]) -> _Pair:
    pair = _Pair()
    ds = DetectorSet([pair])
    for e in events:
        d = ds.deadline()
        if d is not None and d < e.time:
            ds.update(Tick(d))
        ds.update(e)
    return pair


def _both_ways(events: list[Event], seeds: int = 6) -> None:
    for seed in range(seeds):
        compare_runs(_Pair, events, seed=seed, label=f"seed {seed}")


def test_asking_changes_nothing() -> None:
    base: list[Event] = [*_steps(20, T0), _tb(T0 + 20.0, 21)]
    pair = _fed(base)
    before = snapshot(pair)
    assert pair.quiet_steps(_steps(3, T0 + 20.1, 20, 22)) is not None
    assert pair.quiet_steps(_steps(3, T0 + 24.0, 20, 22)) is None  # reaches the deadline
    assert snapshot(pair) == before


@pytest.mark.parametrize("eps", [-1, 0, 1])
def test_a_step_at_a_held_fx_tracing_deadline(eps: int) -> None:
    """fx_tracing holds its incident ``crash_hold_s`` for the ranks' copies:
    a step before that is quiet, one at the deadline releases it."""
    base: list[Event] = [*_steps(20, T0), _tb(T0 + 20.0, 21, detector="fx_tracing")]
    pair = _fed(base)
    assert pair.fx.deadline() == T0 + 25.0 and pair.crash.deadline() is None
    run = [Progress(T0 + 21.0, "train.log:22", step=20, rank=0),
           Progress(_at(T0 + 25.0, eps), "train.log:23", step=21, rank=0)]
    assert (pair.quiet_steps(run) is not None) == (eps < 0)
    _both_ways([*base, *run, *_steps(30, T0 + 26.0, 22, 24)])


def _known_repeat() -> tuple[list[Event], float]:
    """A traceback the program survived (two later steps within the window),
    sent as a warning; then the same traceback again. A known caught one gets
    ``crash_caught_window_s`` (its deadline 300 s off) but two steps of its
    stream prove it at once and pull the deadline to the end of its merge
    hold. Returns the events and that hold's end."""
    events: list[Event] = [*_steps(20, T0), _tb(T0 + 20.0, 21),
                           *_steps(2, T0 + 20.1, 20, 22, every=0.1), *_steps(60, T0 + 21.0, 22, 24)]
    again = T0 + 100.0
    events.append(_tb(again, 100))
    return events, again + DetectorConfig().crash_hold_s


@pytest.mark.parametrize("eps", [-1, 0, 1])
def test_a_proof_that_pulls_a_deadline_into_the_run(eps: int) -> None:
    base, hold_end = _known_repeat()
    pair = _fed(base)
    assert len(pair.crash.episodes()) == 1 and pair.crash.episodes()[0].survived
    assert pair.crash.deadline() == T0 + 100.0 + DetectorConfig().crash_caught_window_s
    # The second step proves the repeat survived: its deadline becomes the
    # hold's end, and a step at it releases the incident (folded: no alert).
    run = [Progress(T0 + 100.5, "train.log:101", step=100, rank=0),
           Progress(_at(hold_end, eps), "train.log:102", step=101, rank=0)]
    assert (pair.quiet_steps(run) is not None) == (eps < 0)
    _both_ways([*base, *run, *_steps(30, hold_end + 1.0, 102, 103)])
    # Another stream's steps prove nothing, but the proof is not read line by
    # line: past the hold's end they are not taken either (conservative).
    other = _steps(3, T0 + 104.0, 0, 1, rank=1)
    assert pair.quiet_steps(other) is None
    _both_ways([*base, *other, *run[:1], *_steps(30, hold_end + 1.0, 102, 103)])


def test_a_watched_stream_learns_a_caught_traceback_in_a_run() -> None:
    """A traceback sent critical (no step within its window) whose stream
    steps on later: the watch learns its signature inside a taken run, and a
    repeat then folds into the first episode."""
    events: list[Event] = [*_steps(20, T0), _tb(T0 + 20.0, 21)]
    pair = _fed([*events, Tick(T0 + 30.0)])
    assert pair.crash._watch and pair.crash.deadline() is None
    later = _steps(40, T0 + 60.0, 20, 22)
    commit = pair.quiet_steps(later[:5])
    assert commit is not None  # a watched stream stays quiet: it only learns
    commit()
    assert list(pair.crash._survived) == [_tb(0.0, 0).signature]
    events += later + [_tb(T0 + 200.0, 70), *_steps(40, T0 + 200.1, 60, 71, every=0.1)]
    pair = _fed(events)
    assert pair.flush() == [] and [e.count for e in pair.crash.episodes()] == [2]  # the repeat folded in
    _both_ways(events)
    # A relaunch (steps from 0 again) disproves it instead.
    _both_ways([*_steps(20, T0), _tb(T0 + 20.0, 21), *_steps(40, T0 + 60.0, 0, 22)])


def test_unsorted_times_many_ranks_and_crashes_between() -> None:
    rng = random.Random(5)
    events: list[Event] = []
    line = 1
    for i in range(300):
        for r in (3, 0, 2, 1):
            events.append(Progress(T0 + i + rng.uniform(-0.3, 0.3), f"train.log:{line}", step=i, rank=r))
            line += 1
        if i % 60 == 30:
            events.append(_tb(T0 + i + 0.5, line, rank=i % 4))
            line += 1
        if i % 90 == 45:
            events.append(_tb(T0 + i + 0.5, line, detector="fx_tracing", rank=1))
            line += 1
    _both_ways(events, seeds=4)


def test_a_nan_time_while_held_is_not_quiet() -> None:
    pair = _fed([*_steps(20, T0), _tb(T0 + 20.0, 21, detector="fx_tracing")])
    nan = [Progress(T0 + 21.0, "train.log:22", step=20, rank=0), Progress(float("nan"), "train.log:23", step=21)]
    assert pair.quiet_steps(nan) is None
    # Nothing held: no deadline to cross, a NaN time is quiet (and never the clock).
    pair = _fed(_steps(20, T0))
    assert pair.quiet_steps(nan) is not None
    _both_ways([*_steps(20, T0), *nan, *_steps(20, T0 + 30.0, 30, 30), _tb(T0 + 50.0, 60), Tick(T0 + 60.0)])


def test_the_same_event_twice() -> None:
    """``add`` records an event handed over twice in a row once: a run holding
    one does too, and a run ending in the line recorded last is refused."""
    steps = _steps(40, T0)
    twice: list[Event] = [*steps[:10], steps[10], steps[10], *steps[11:20], steps[20], steps[20], steps[20],
                          *steps[21:]]
    _both_ways(twice)
    pair = _fed(steps[:10])
    assert pair.quiet_steps([steps[10], steps[9]]) is None
    assert pair.quiet_steps([steps[9], steps[10]]) is not None
    _both_ways([*steps[:10], steps[9], steps[10], *steps[11:]])


def test_runs_across_the_record_s_wait_and_many_streams() -> None:
    """Runs that fill the waiting lines (``PENDING_MAX``) mid-run, new
    streams, more than ``STREAMS_MAX`` of them (the oldest pushed out), and a
    crash reading the record between."""
    events: list[Event] = []
    t = T0
    for i in range(PENDING_MAX * 3 + 17):
        events.append(Progress(t, f"train.log:{i + 1}", step=i, rank=0))
        t += 0.01
    for i in range(STREAMS_MAX + 40):
        events.append(Progress(t, f"r{i}.log:{i}", step=i, rank=i % 3))
        t += 0.01
    events.append(_tb(t, 10, rank=0))
    events += [Progress(t + 0.01 * i, f"train.log:{PENDING_MAX * 4 + i}", step=PENDING_MAX * 4 + i, rank=0)
               for i in range(400)]
    for seed in range(3):
        compare_runs(_Pair, events, seed=seed, label=f"seed {seed}")


# -- the record, against a plain one ------------------------------------------------

class _Plain:
    """The record kept one line at a time, split at once (the old ``add``)."""

    def __init__(self) -> None:
        self.seen: OrderedDict[tuple[str, int | None], deque[tuple[int, int | None, float]]] = OrderedDict()
        self.latest = float("-inf")
        self.last: Progress | None = None

    def add(self, p: Progress) -> None:
        if p is self.last:
            return
        self.last = p
        if p.time > self.latest:
            self.latest = p.time
        file, _, number = p.source.rpartition(":")
        key = (file, p.rank)
        lines = self.seen.get(key)
        if lines is None:
            lines = self.seen[key] = deque(maxlen=LINES_KEEP)
            if len(self.seen) > STREAMS_MAX:
                self.seen.popitem(last=False)
        lines.append((int(number) if number.isdigit() else -1, p.step, p.time))


def _same(lines: StepLines, plain: _Plain) -> None:
    assert lines.latest == plain.latest  # (first: reading it works the waiting lines in too)
    assert [(k, list(v)) for k, v in lines.seen.items()] == [(k, list(v)) for k, v in plain.seen.items()]


@pytest.mark.parametrize(("streams", "odd"), [(1, False), (3, False), (3, True), (40, True), (STREAMS_MAX + 30, True)])
def test_the_record_is_the_plain_one(streams: int, odd: bool) -> None:
    """Lines of ``streams`` streams (``odd``: a few of them rare, new ones now
    and then, odd sources, NaN times), handed over one at a time and in runs,
    read at random points: the same lines and latest time as one at a time
    split at once. (Few streams, all seen: only their last lines are split.)"""
    rng = random.Random(streams)
    made: list[Progress] = []
    for i in range(PENDING_MAX * 12):
        s = rng.randrange(streams) if not odd or rng.random() < 0.9 else rng.randrange(streams + 3)
        t = T0 + i * 0.5 + rng.uniform(-3.0, 3.0)
        if odd and rng.random() < 0.002:
            t = float("nan")
        source = f"f{s % 7}.log:{i}"
        if odd and rng.random() < 0.03:
            source = rng.choice([f"f{s % 7}.log", "x:y:z", "a:-3"])
        made.append(Progress(t, source, step=i if rng.random() < 0.95 else None, rank=s if s % 5 else None))
    lines, plain = StepLines(), _Plain()
    i = 0
    while i < len(made):
        n = rng.choice((1, 2, 5, 64, 300, PENDING_MAX + 7))
        run = made[i:i + n]
        i += n
        if rng.random() < 0.05:
            run = [*run, run[-1]]
        for p in run:
            plain.add(p)
        if len(run) >= 2 and rng.random() < 0.8:
            lines.add_run(run)
            lines.add_run(run)  # the other detector's hand-over
        else:
            for p in run:
                lines.add(p)
                lines.add(p)
        if rng.random() < 0.1:
            _same(lines, plain)
    _same(lines, plain)


def test_the_clock_counts_the_step_lines() -> None:
    """The step lines' latest time is kept in the shared record, not by each
    detector: a crash stamped before the latest step arrives at that step,
    and a Tick before a deadline that unsorted step lines passed releases."""
    pair = _fed([*_steps(20, T0), _tb(T0 + 5.0, 21, detector="fx_tracing")])  # a stale stamp
    assert pair.fx.deadline() == T0 + 19.0 + DetectorConfig().crash_hold_s
    base, hold_end = _known_repeat()
    pair = _fed([*base, Progress(hold_end + 50.0, "other.log:1", step=0, rank=3),
                 *_steps(2, T0 + 100.5, 100, 101, every=0.1)])
    assert pair.crash.deadline() == hold_end  # proven survived: the merge hold only
    DetectorSet([pair]).update(Tick(hold_end - 1.0))  # a tick before it; the step lines are past it
    assert pair.crash.deadline() is None


def test_a_set_takes_runs_with_both_crash_detectors() -> None:
    """Through ``build_detectors``: the pair's commits both run, the record
    holds each line once."""
    ds = DetectorSet(build_detectors(DetectorConfig(tz="UTC")))
    fx, crash = ds.get("fx_tracing"), ds.get("crash")
    assert isinstance(fx, CrashDetector) and isinstance(crash, CrashDetector)
    run = _steps(64, T0)
    commit_fx, commit_crash = fx.quiet_steps(run), crash.quiet_steps(run)
    assert commit_fx is not None and commit_crash is not None
    commit_fx()
    commit_crash()
    assert list(crash._progress[("train.log", 0)]) == [(i + 1, i, T0 + i) for i in range(64 - LINES_KEEP, 64)]


@pytest.mark.parametrize("shape", ["progress", "ranks"])
def test_speed_logs_runs_are_taken(shape: str) -> None:
    events = dict(all_log_events())[f"speed-{shape}"]
    offered, taken = compare_runs(_Pair, events, seed=7, label=shape)
    assert offered > 50
    assert taken >= 0.9 * offered, (offered, taken)


@pytest.mark.parametrize("eps", [-1, 0, 1])
def test_where_a_refused_run_turns(eps: int) -> None:
    """``refused_at``: the first step at or past the held incident's bound
    (where ``quiet_steps`` refuses), the steps before it quiet on their own;
    nothing held: no hint."""
    base: list[Event] = [*_steps(20, T0), _tb(T0 + 20.0, 21, detector="fx_tracing")]
    pair = _fed(base)
    bound = pair.fx.deadline()
    assert bound is not None
    run = [*_steps(5, T0 + 20.5, 20, 22, every=0.5), Progress(_at(bound, eps), "train.log:40", step=30, rank=0),
           *_steps(3, bound + 1.0, 31, 41)]
    turn = 5 if eps >= 0 else 6
    assert pair.fx.refused_at(run) == turn
    assert pair.fx.quiet_steps(run[:turn]) is not None
    assert (pair.fx.quiet_steps(run[:turn + 1]) is None) == (turn < len(run))
    assert _fed(_steps(3, T0)).fx.refused_at(_steps(3, T0 + 4.0)) is None
