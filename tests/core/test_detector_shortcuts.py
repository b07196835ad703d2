"""The detectors' shortcuts give the alerts of their plain per-event path (issue 20).

Each shortcut skips work that provably cannot change an alert:

* ``crash``: the earliest deadline of the held incidents is kept
  (``CrashDetector._due``, re-read by ``_rehold`` wherever one is held,
  released or moved), so ``deadline()`` is a field and an event before it
  releases nothing without a pass over the held ones; a held incident's
  stream is kept (``Incident.stream``) and compared before ``survivable``.
* ``straggler``: the hang rules' per-rank silence limit is inline and only
  the silent ranks are sorted (``straggler_hung``); a rank's interval
  medians come from sorted lists kept as the intervals slide
  (``RankState._interval``), not a sort of both per step; a figure that no
  rank reported within the window (the latest of all ranks, kept as they
  report) is not looked for rank by rank (``Straggler._stretch``).

The plain path is the code before them, put back here: every held
incident scanned on every event (``_due`` -inf while any is held) and the
minimum worked out at each ``deadline()``, which also checks each held
incident's stream against its root; the hang rules and the interval
medians and the stretch as they were. Both paths must give the same alert JSON on every
fixture log and straggler folder, the shared real-world logs (skipped where
absent), seeded random logs, the routes test's run of every hot path, and
runs built to sit on each shortcut's edge (a release, a tick, a silence
exactly at its limit; intervals that tie as they leave the window).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from dflash_watch import replay as replay_module
from dflash_watch.detectors import straggler as straggler_module
from dflash_watch.detectors import straggler_hung as hung
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.crash import CrashDetector
from dflash_watch.detectors.crash_incident import stream_of
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.detectors.steps import sorted_median
from dflash_watch.detectors.straggler import Straggler
from dflash_watch.detectors.straggler_ranks import RankState
from dflash_watch.parsers.events import Crash, Event, Frame, Progress, Quiet, Tick
from tests.core.synthetic import drive
from tests.core.test_detector_routes import _run as hot_paths_run
from tests.random_logs import random_log

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
REALWORLD = ROOT.parent / "shared" / "realworld"
R = TypeVar("R")


# -- the plain path: the code before the shortcuts ------------------------------

def _plain_rehold(self: CrashDetector) -> None:
    # Every event scans the held incidents while any is held (the gate
    # ``now >= _due`` always passes), as before ``_due`` was kept.
    self._due = -math.inf if self._held else math.inf


def _plain_deadline(self: CrashDetector) -> float | None:
    for inc in self._held:
        assert inc.stream == stream_of(inc.root)[:2], "a held incident's kept stream is not its root's"
    if not self._held:
        return None
    return min(inc.deadline for inc in self._held)


def _plain_next_deadline(ranks: list[RankState], config: DetectorConfig, in_phase: bool,
                         now: float) -> float | None:
    ranks = hung.stepping(ranks)
    if len(ranks) < 2:
        return None
    last = max([s.last_step_time or 0.0 for s in ranks])
    best = last + hung.limit(ranks, config, in_phase)
    for s in ranks:
        own = hung.silence_limit(s, config)
        if own is not None and s.last_seen is not None and now < s.last_seen + own < best:
            best = s.last_seen + own
    return best if best > now else None


def _plain_find_hung(ranks: list[RankState], config: DetectorConfig, in_phase: bool, t: float,
                     limit: Callable[[list[RankState], DetectorConfig, bool], float] = hung.limit,
                     ) -> tuple[RankState, str] | None:
    """``find_hung`` as it was: the stepping ranks, the limit (``limit``),
    the latest step one by one."""
    ranks = hung.stepping(ranks)
    if len(ranks) < 2:
        return None
    wait = limit(ranks, config, in_phase)
    last = max([s.last_step_time or 0.0 for s in ranks])
    top = max([s.last_step or 0 for s in ranks])
    if t - last >= wait:
        waiters = [s for s in ranks if s.waits_on_others()]
        silent = [s for s in ranks if not s.waits_on_others() and (s.last_seen or 0.0) <= t - wait]
        behind = [s for s in silent if (s.last_step or 0) < top]
        if behind:
            return min(behind, key=lambda s: (s.last_step or 0, s.rank)), "behind"
        if waiters and silent and len(silent) < len(ranks):
            return min(silent, key=lambda s: (s.last_step or 0, s.rank)), "waited on"
        return None
    for s in sorted(ranks, key=lambda s: s.rank):
        own = hung.silence_limit(s, config)
        if own is None or s.last_seen is None or t - s.last_seen < own:
            continue
        ahead = max((o.last_step or 0) for o in ranks if o is not s)
        if ahead >= (s.last_step or 0) + 2 * s.usual_n:
            return s, "silent"
    return None


def _plain_interval(self: RankState, seconds: float, steps: int) -> None:
    self.intervals.append((seconds, steps))
    self.usual_s = sorted_median(sorted([dt for dt, _ in self.intervals]))
    self.usual_n = max(1, int(sorted_median(sorted([float(n) for _, n in self.intervals]))))


def _plain_stretch(self: Straggler, t: float, name: str) -> tuple[float, float, dict[int, float]] | None:
    window = self.config.straggler_window_s
    start = t - window
    newest: dict[int, float] = {}
    end = start
    held = float("-inf")
    for rank, state in self.ranks.items():
        at = state.newest[name]
        if at < start:
            continue
        if not newest or at < end:
            end = at
        newest[rank] = at
        first = state.series[name][0][0]
        if first > held:
            held = first
    if not newest:
        return None
    return max(end - window, held), end, newest


@contextmanager
def plain_path() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(CrashDetector, "_rehold", _plain_rehold)
        m.setattr(CrashDetector, "deadline", _plain_deadline)
        m.setattr(straggler_module, "next_deadline", _plain_next_deadline)
        m.setattr(straggler_module, "find_hung", _plain_find_hung)
        m.setattr(RankState, "_interval", _plain_interval)
        m.setattr(Straggler, "_stretch", _plain_stretch)
        yield


def both(run: Callable[[], R]) -> tuple[R, R]:
    fast = run()
    with plain_path():
        plain = run()
    return fast, plain


# -- logs -------------------------------------------------------------------------

def _replay(paths: list[Path]) -> list[str]:
    return [a.to_json() for a in replay_module.replay([str(p) for p in paths]).alerts]


def _logs() -> list[list[Path]]:
    out = [[p] for p in sorted(FIXTURES.rglob("*")) if p.suffix in (".log", ".txt")]
    out += [sorted(p for p in d.rglob("*") if p.is_file())
            for d in sorted((FIXTURES / "straggler").iterdir()) if d.is_dir()]
    if REALWORLD.is_dir():
        out += [[p] for p in sorted(REALWORLD.glob("*.log"))]
    return out


@pytest.mark.parametrize("paths", _logs(), ids=lambda ps: "+".join(p.name for p in ps)[:60])
def test_every_log_gives_the_plain_alerts(paths: list[Path]) -> None:
    fast, plain = both(lambda: _replay(paths))
    assert fast == plain


@pytest.mark.parametrize("seed", range(4))
def test_random_logs_give_the_plain_alerts(seed: int, tmp_path: Path) -> None:
    log = random_log(tmp_path / f"random-{seed}.log", seed + 500)
    fast, plain = both(lambda: _replay([log]))
    assert fast == plain


# -- event runs -------------------------------------------------------------------

def _drive(events: list[Event], config: DetectorConfig | None = None, *, until: float | None = None) -> list[str]:
    ds = DetectorSet(build_detectors(config or DetectorConfig()))
    return [a.to_json() for a in drive(ds, events, until=until)]


def _fed(events: list[Event], config: DetectorConfig | None = None) -> tuple[list[str], list[float | None]]:
    """Alerts, each with the index of the event that sent it (a held crash
    released one event late shows), and the set's deadline after each
    event; fed one by one (no ticks added: the runs below bring their own
    at the edges)."""
    ds = DetectorSet(build_detectors(config or DetectorConfig()))
    alerts: list[str] = []
    deadlines: list[float | None] = []
    for i, e in enumerate(events):
        alerts += [f"{i} {a.to_json()}" for a in ds.update(e)]
        deadlines.append(ds.deadline())
    alerts += [a.to_json() for a in ds.flush()]
    return alerts, deadlines


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_hot_paths_run_gives_the_plain_alerts(seed: int) -> None:
    events = hot_paths_run(seed)
    fast, plain = both(lambda: _drive(events, until=events[-1].time + 3600.0))
    assert fast == plain
    assert any('"detector": "crash"' in a for a in fast) and any('"detector": "straggler"' in a for a in fast)


T0 = 1_700_000_000.0
_FRAMES = (Frame("train.py", 10, "step"),)


def _crash(t: float, line: int, rank: int = 0, kind: str = "exception") -> Crash:
    return Crash(t, f"train.log:{line}", detector="crash", kind=kind, exc_type="ValueError",
                 message="bad batch", signature="ValueError @ train.py:step", rank=rank, frames=_FRAMES)


def _crash_edges(shift: float) -> list[Event]:
    """Caught and fatal tracebacks of several ranks; step lines, ticks and
    a Quiet at their incidents' deadlines, ``shift`` seconds off them."""
    c = DetectorConfig()
    hold, survive = c.crash_hold_s, c.crash_survive_s
    events: list[Event] = []
    line = 0
    t = T0
    for round_ in range(6):
        for step in range(5):
            for rank in range(3):
                line += 1
                events.append(Progress(t, f"train.log:{line}", step=round_ * 100 + step, rank=rank))
            t += 1.0
        # rank 1 crashes (a caught one in even rounds: its steps go on)
        line += 1
        arrival = t
        events.append(_crash(t, line, rank=1, kind="exception" if round_ % 2 == 0 else "segfault"))
        deadline = arrival + max(hold, survive) if round_ % 2 == 0 else arrival + hold
        # other ranks step on up to the deadline (rank 1 only in even rounds)
        ranks = (0, 1, 2) if round_ % 2 == 0 else (0, 2)
        # round 0: proven caught inside the survival window; 2: only after it;
        # 4: its second proof exactly at the window's end
        first = {0: arrival + 0.1, 2: arrival + 0.5, 4: arrival + 0.1}.get(round_, arrival + 0.5)
        second = {0: arrival + 0.2, 4: arrival + survive + shift}.get(round_, deadline - 0.5 + shift)
        for k, at in enumerate((first, second, deadline + shift)):
            for rank in ranks:
                line += 1
                events.append(Progress(at, f"train.log:{line}", step=round_ * 100 + 10 + k, rank=rank))
        if round_ % 3 == 1:
            events.append(Tick(deadline + shift))
        if round_ % 3 == 2:
            events.append(Quiet(deadline - 1.0 + shift, deadline - 3.0))
        t = deadline + 2 * c.crash_dedupe_s  # the next one is an incident of its own
    return events


@pytest.mark.parametrize("shift", [-1e-6, 0.0, 1e-6])
def test_crash_releases_at_its_deadline_as_the_plain_path(shift: float) -> None:
    events = _crash_edges(shift)
    fast, plain = both(lambda: _fed(events))
    assert fast == plain
    alerts, deadlines = fast
    assert sum('"detector": "crash"' in a and '"state": "firing"' in a for a in alerts) >= 3
    assert any(d is not None for d in deadlines)


def _straggler_edges(shift: float, *, ranks: int = 4, steps: int = 300) -> list[Event]:
    """Ranks stepping on whole seconds (their intervals tie as they leave
    the window: 1, 2 and 3 s strides); rank 2 goes silent, and the
    others' lines and ticks land exactly on its silence limit (``shift``
    off it)."""
    c = DetectorConfig()
    rng = random.Random(7)
    events: list[Event] = []
    for r in range(ranks):
        t = T0
        for i in range(steps):
            if r == 2 and i >= steps // 2:
                break
            t += rng.choice((1.0, 2.0, 3.0)) if r == 3 else 2.0
            events.append(Progress(t, f"rank{r}.log:{i + 1}", step=i, rank=r, step_seconds=2.0))
    silent_at = max(e.time for e in events if isinstance(e, Progress) and e.rank == 2)
    for factor in (0.5, 1.0):
        limit = max(c.straggler_hung_min_s, c.straggler_hung_factor * 2.0 * factor)
        events.append(Tick(silent_at + limit + shift))
    events.sort(key=lambda e: e.time)
    return events


@pytest.mark.parametrize("shift", [-1e-6, 0.0, 1e-6])
def test_straggler_judges_a_silence_at_its_limit_as_the_plain_path(shift: float) -> None:
    events = _straggler_edges(shift)
    fast, plain = both(lambda: _fed(events, DetectorConfig(straggler_warmup_s=0.0)))
    assert fast == plain
    alerts, _ = fast
    assert any('"detector": "straggler"' in a and '"kind": "hung"' in a for a in alerts), alerts


def test_rank_interval_medians_are_the_sorted_ones() -> None:
    """Intervals that tie, leave the window and come back; a restart clears them."""
    rng = random.Random(3)
    fast, plain = RankState(0, 0.0), RankState(0, 0.0)
    for i in range(2000):
        seconds = rng.choice((0.5, 1.0, 1.0, 2.0, 1e-9, 3.0)) if i % 500 else 1.0
        steps = rng.choice((1, 1, 2, 100))
        if i % 700 == 699:
            for s in (fast, plain):
                s.measured["probe"] = 10**9  # a probe line's step far above the next: a relaunch
                s.add(float(i), step=0, window_s=60.0, restart=True)  # (clears the intervals)
                assert not s.intervals
        fast._interval(seconds, steps)
        _plain_interval(plain, seconds, steps)
        assert (fast.usual_s, fast.usual_n) == (plain.usual_s, plain.usual_n), i


@pytest.mark.parametrize("shift", [-1e-6, 0.0, 1e-6])
def test_straggler_stretch_at_the_window_edge_is_the_plain_one(shift: float) -> None:
    """Ranks give step times, rank 3 a slow one, then none of them any
    more: ticks put the last report exactly a window back (``shift`` off
    it), where the stretch ends; the rank table after every event too."""
    c = DetectorConfig(straggler_warmup_s=0.0)
    events: list[Event] = []
    for i in range(400):
        t = T0 + 2.0 * i
        for r in range(4):
            seconds = (6.0 if r == 3 else 2.0) if i < 300 else None
            events.append(Progress(t + 0.01 * r, f"rank{r}.log:{i + 1}", step=i, rank=r, step_seconds=seconds))
    last = max(e.time for e in events if isinstance(e, Progress) and e.step_seconds is not None)
    events.append(Tick(last + c.straggler_window_s + shift))
    events.sort(key=lambda e: e.time)

    def run() -> tuple[list[str], list[object]]:
        ds = DetectorSet(build_detectors(c))
        alerts: list[str] = []
        tables: list[object] = []
        for e in events:
            alerts += [a.to_json() for a in ds.update(e)]
            tables.append(ds.rank_table())
        return alerts, tables

    fast, plain = both(run)
    assert fast == plain
    assert any('"kind": "slow"' in a for a in fast[0])
