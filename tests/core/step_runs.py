"""The batching contract's differential harness (issue 20): one home.

``DetectorBase.quiet_steps`` lets a detector take a run of step lines at
once when it proves them quiet (``detectors.base.StepCommit``). This feeds
the same events to two detectors made alike: one event at a time, with a
Tick at each deadline before the next event (as ``Monitor.advance_to``),
and with runs of consecutive step lines offered to ``quiet_steps`` (random
lengths; a run it refuses goes one at a time). The alert JSON must match,
and so must ``deadline()`` and the whole state (``snapshot``: every field,
recursively) at every run's end.

    from tests.core.step_runs import compare_runs, log_event_lists
    for name, events in log_event_lists():
        offered, taken = compare_runs(lambda: ThroughputDrop(DetectorConfig()), events, seed=1)
"""

from __future__ import annotations

import datetime
import functools
import math
import random
import subprocess
import sys
import tempfile
import types
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from dflash_watch.detectors.base import Alert, Detector
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.parsers.events import Event, Progress, Tick

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
REALWORLD = ROOT.parent / "shared" / "realworld"
SPEED_SHAPES = ("quiet", "progress", "ranks", "degraded", "nan", "legacy")
RANDOM_SEEDS = (1, 2, 3, 4, 5)
RUN_LENGTHS = (2, 3, 5, 16, 64, 300)
_CODE = (type, types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.BuiltinMethodType,
         functools.partial)


def snapshot(obj: Any, _seen: dict[int, int] | None = None) -> Any:
    """A comparable copy of everything ``obj`` holds: slots and ``__dict__``
    fields, recursively; deques and lists as lists, sets sorted by repr,
    NaN equal to NaN; functions and bound methods left out (they are code,
    not state). A cycle is named by its first visit's index."""
    seen = {} if _seen is None else _seen
    if obj is None or isinstance(obj, (bool, int, str, bytes)):
        return obj
    if isinstance(obj, float):
        return ("nan",) if math.isnan(obj) else obj
    if isinstance(obj, _CODE):
        return ("code",)
    key = id(obj)
    if key in seen:
        return ("seen", seen[key])
    seen[key] = len(seen)
    if isinstance(obj, dict):
        return ("dict", [(snapshot(k, seen), snapshot(v, seen)) for k, v in obj.items()])
    if isinstance(obj, (list, tuple, deque)):
        return (type(obj).__name__, [snapshot(v, seen) for v in obj])
    if isinstance(obj, (set, frozenset)):
        return ("set", sorted(repr(snapshot(v, seen)) for v in obj))
    fields: list[tuple[str, Any]] = []
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name) and name != "__weakref__":
                fields.append((name, snapshot(getattr(obj, name), seen)))
    for name, value in sorted(getattr(obj, "__dict__", {}).items()):
        fields.append((name, snapshot(value, seen)))
    return (type(obj).__name__, fields)


def _runs(events: Sequence[Event], rng: random.Random) -> Iterator[tuple[bool, Sequence[Event]]]:
    """``events`` cut into (is a run of step lines, events) pieces."""
    i, n = 0, len(events)
    while i < n:
        if type(events[i]) is Progress:
            want = rng.choice(RUN_LENGTHS)
            j = i
            while j < n and j - i < want and type(events[j]) is Progress:
                j += 1
            yield j - i >= 2, events[i:j]
            i = j
        else:
            yield False, events[i:i + 1]
            i += 1


class _Feeder:
    """One detector behind a ``DetectorSet`` (its routes, its kept deadline),
    fed as the Monitor feeds: deadlines before an event become Ticks."""

    def __init__(self, detector: Detector) -> None:
        self.detector = detector
        self.set = DetectorSet([detector])
        self.alerts: list[str] = []

    def _advance(self, t: float) -> None:
        last = None
        while True:
            d = self.set.deadline()
            if d is None or d >= t or (last is not None and d <= last):
                return
            last = d
            self._add(self.set.update(Tick(d)))

    def _add(self, alerts: list[Alert]) -> None:
        self.alerts.extend(a.to_json() for a in alerts)

    def feed(self, event: Event) -> None:
        self._advance(event.time)
        self._add(self.set.update(event))

    def offer(self, steps: Sequence[Progress]) -> bool:
        """Offer a run; True if the detector took it at once."""
        self._advance(steps[0].time)
        commit = self.detector.quiet_steps(steps)
        if commit is None:
            for e in steps:
                self.feed(e)
            return False
        commit()
        self.set.refresh()
        return True

    def finish(self) -> None:
        self._add(self.set.flush())


def compare_runs(
    make: Callable[[], Detector],
    events: Sequence[Event],
    *,
    seed: int = 0,
    label: str = "",
    check_state: bool = True,
) -> tuple[int, int]:
    """Feed ``events`` one at a time to one detector and with runs offered to
    another; assert the same alerts, deadlines and states. Returns (runs
    offered, runs taken at once)."""
    rng = random.Random(seed)
    plain, batched = _Feeder(make()), _Feeder(make())
    offered = taken = 0
    for is_run, piece in _runs(events, rng):
        if not is_run:
            for e in piece:
                plain.feed(e)
                batched.feed(e)
            continue
        for e in piece:
            plain.feed(e)
        offered += 1
        steps = [e for e in piece if isinstance(e, Progress)]
        if batched.offer(steps):
            taken += 1
        where = f"{label} after the run ending at {piece[-1].time!r} (event {offered})"
        assert batched.alerts == plain.alerts, f"alerts differ {where}"
        assert batched.detector.deadline() == plain.detector.deadline(), f"deadline differs {where}"
        if check_state:
            assert snapshot(batched.detector) == snapshot(plain.detector), f"state differs {where}"
    plain.finish()
    batched.finish()
    assert batched.alerts == plain.alerts, f"alerts differ at the end of {label}"
    return offered, taken


# -- event sources --------------------------------------------------------------

def _events(path: Path) -> list[Event]:
    from dflash_watch.replay import log_events

    return list(log_events(str(path), tz=datetime.UTC))


def log_paths() -> list[Path]:
    """Every fixture log and traceback, the shared real-world logs (where present)."""
    paths = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".log", ".txt"))
    if REALWORLD.is_dir():
        paths += sorted(REALWORLD.glob("*.log"))
    return paths


def speed_log(shape: str, lines: int = 20000) -> Path:
    """A log of ``benchmarks/speed_logs.py``'s shape (quiet, progress, ranks, degraded, legacy), made once."""
    folder = Path(tempfile.gettempdir()) / "dflash-watch-step-runs"
    folder.mkdir(exist_ok=True)
    path = folder / f"{shape}-{lines}.log"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "speed_logs.py"), shape, str(lines), str(path)],
                       check=True, capture_output=True)
    return path


def log_event_lists(random_seeds: Sequence[int] = RANDOM_SEEDS) -> Iterator[tuple[str, list[Event]]]:
    """(name, events) of every fixture and shared log, the speed shapes
    and random logs (``tests.random_logs``)."""
    from tests.random_logs import random_log

    for path in log_paths():
        yield path.name, _events(path)
    for shape in SPEED_SHAPES:
        yield f"speed-{shape}", _events(speed_log(shape))
    folder = Path(tempfile.gettempdir()) / "dflash-watch-step-runs"
    folder.mkdir(exist_ok=True)
    for seed in random_seeds:
        yield f"random-{seed}", _events(random_log(folder / f"random-{seed}.log", seed))

# Every log the detectors' batching is held to: fixtures and shared logs,
# the speed shapes, random logs. Known at collection time, for parametrize.
LOG_COUNT = len(log_paths()) + len(SPEED_SHAPES) + len(RANDOM_SEEDS)


@functools.cache
def all_log_events() -> list[tuple[str, list[Event]]]:
    """``log_event_lists()`` read once per test session: each detector's
    batching test walks the same logs (events are frozen, so sharing them
    is safe)."""
    logs = list(log_event_lists())
    assert len(logs) == LOG_COUNT, "a log the parametrized tests would not reach"
    return logs

