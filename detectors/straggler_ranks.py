"""What the straggler detector knows of each rank, and the row it shows.

One ``RankState`` per rank: its recent step, compute and wait seconds
(a window of data time, bounded), its last step and when it advanced, when
it was last active, and its latest heartbeat (where it waits). The
detector (``straggler.py``) judges from these; the ranks panel and
Prometheus read them as ``RankRow``s, so the panel and the alert never
disagree.

>>> r = RankState(3, first_seen=0.0)
>>> for i in range(5):
...     r.add(10.0 * i, step=i, step_s=1.0, compute_s=0.8, wait_s=0.2, window_s=60.0)
>>> r.median("compute", 0.0, 40.0), r.last_step, r.usual_s
(0.8, 4, 10.0)
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice

from ..parsers.events import Heartbeat, Progress
from ..parsers.native import KERNELS
from ..parsers.step_columns import columns_of
from .steps import sorted_median

# Per rank, per figure: at most this many recent values (a rank that
# reports ten times a second keeps the last minute, not an hour).
_KEPT = 256
# Intervals between a rank's step advances, for its usual cadence.
_INTERVALS_KEPT = 16
# A full window's median is the mean of its middle two (``_INTERVALS_KEPT``
# is even; ``test_rank_cadence_window_keeps_its_invariant`` checks the median).
_MID = _INTERVALS_KEPT // 2
_SWAP = KERNELS.window_swap if KERNELS is not None else None
# ``rank3.log:120``, ``train_rank12.out:7``: the rank of a per-rank log
# whose lines carry no prefix (torchrun ``--redirects``/``--tee`` files
# named by rank, ``rank*.log`` of the config template).
_RANK_IN_SOURCE = re.compile(r"(?:^|[/\\_.\-])rank[_\-]?(\d{1,6})(?=[._\-][^/\\]*:\d+$|:\d+$)")


# Where a rank waits *on the others*: a collective or a barrier. A rank
# waiting in its data loader or in a file read waits on nobody: if the
# others wait on it, it is the one holding them back.
_COLLECTIVE = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|all_?to_?all|collective|"
    r"\bsend\b|\brecv\b|nccl|gloo|wait\(|monitored_barrier|timed-out", re.IGNORECASE)


def is_collective(where: str) -> bool:
    """True when ``where`` (a heartbeat's ``waiting_in``) names a collective."""
    return _COLLECTIVE.search(where) is not None


# torchrun's ``--redirects`` files, cited with their local-rank folder.
_TORCHRUN_REDIRECT = re.compile(r"(?:^|[/\\])(\d{1,6})[/\\]std(?:out|err)\.log:\d+$")


def rank_of_source(source: str) -> int | None:
    """The rank a log's file name gives, else None.

    >>> rank_of_source("rank3.log:12"), rank_of_source("3/stdout.log:7"), rank_of_source("train.log:5")
    (3, 3, None)
    """
    if "rank" not in source:
        m = _TORCHRUN_REDIRECT.search(source) if "std" in source else None
        return int(m.group(1)) if m else None
    m = _RANK_IN_SOURCE.search(source)
    return int(m.group(1)) if m else None


def sources_name_ranks(sources: list[str]) -> bool:
    """Whether any of a run's ``sources`` gives a rank (``rank_of_source``):
    the per-rank files of ``torchrun --redirects`` or a ``rank3.log``.
    ``rank_of_source`` needs "rank" or "std" in a source; a search for one
    letter (memchr) is ~50x faster than for a word, and most file names
    have no "k" or no "d", so the usual run (one process's log) costs one
    join and two searches, not a look at each line."""
    text = "\n".join(sources)
    return (("k" in text and "rank" in text) or ("d" in text and "std" in text)) and any(
        rank_of_source(source) is not None for source in sources)


def ranks_with_sources(ranks: list[int | None], sources: list[str]) -> list[int | None]:
    """``ranks`` (a run's lines' own), each None given its file's rank where
    the file names one (``rank_of_source``): lines without a rank prefix in
    a per-rank file are that rank's. ``ranks`` itself where no None is or
    no source names a rank."""
    if None not in ranks or not sources_name_ranks(sources):
        return ranks
    return [rank_of_source(s) if r is None else r for r, s in zip(ranks, sources)]


@dataclass(frozen=True, slots=True)
class RankRow:
    """One row of the ranks panel (and of the per-rank Prometheus series).

    Seconds are the medians over the detector's window; None where the
    rank gives no such figure. ``slow``/``hung``: the detector names this
    rank in a firing alert now.
    """

    rank: int
    gpu: int | None
    step_seconds: float | None
    compute_seconds: float | None
    wait_seconds: float | None
    last_step: int | None
    last_seen: float | None
    slow: bool
    hung: bool
    waiting_in: str | None


def _slid(values: list[float], old: float, new: float) -> float:
    """A full cadence window kept sorted, slid in place (the first ``old``
    out, ``new`` in after its equals), and its median, the mean of its
    middle two (``sorted_median`` of an even count, inline): in C where
    built (one call, the items moved in place), else ``bisect``."""
    median = _SWAP(values, old, new) if _SWAP is not None else None
    if median is None:
        del values[bisect_left(values, old)]
        insort(values, new)
        median = (values[_MID - 1] + values[_MID]) / 2
    return median


class RankState:
    """The bounded figures of one rank (see the module docstring)."""

    __slots__ = (
        "rank", "first_seen", "last_seen", "last_step", "last_step_time", "source", "series",
        "intervals", "heartbeat", "timed_out", "measured", "usual_s", "usual_n", "newest",
        "_seconds", "_steps", "_newest_any",
    )

    def __init__(self, rank: int, first_seen: float, newest_any: dict[str, float] | None = None) -> None:
        self.rank = rank
        self.first_seen = first_seen
        self.last_seen: float | None = None  # any sign of work: a step, a probe line, an eval bar
        self.last_step: int | None = None
        self.last_step_time: float | None = None
        self.source = ""
        # "step", "compute", "wait": (time, seconds), oldest first.
        self.series: dict[str, deque[tuple[float, float]]] = {
            "step": deque(maxlen=_KEPT), "compute": deque(maxlen=_KEPT), "wait": deque(maxlen=_KEPT)}
        # Per figure, the time of its latest report, -inf before any (where
        # the ranks' values end when they are compared: ``Straggler._stretch``).
        self.newest: dict[str, float] = dict.fromkeys(self.series, -math.inf)
        # The same, the latest of every rank that shares it (``newest_any``:
        # the detector's, one for all its ranks): a figure no rank gave
        # within a window needs no pass over the ranks (``_stretch``).
        self._newest_any = newest_any if newest_any is not None else dict(self.newest)
        # (seconds, steps) between step advances.
        self.intervals: deque[tuple[float, int]] = deque(maxlen=_INTERVALS_KEPT)
        # The same intervals' seconds and steps, each kept sorted as they
        # slide (``bisect``): their medians are read at every step advance.
        self._seconds: list[float] = []
        self._steps: list[float] = []
        # The usual cadence, the medians of ``intervals`` (``_interval``):
        # fields, because the hang rules read them for every rank on every
        # judgement. None and 1 until the rank advanced twice.
        self.usual_s: float | None = None  # seconds between step advances
        self.usual_n = 1  # steps between them (a rank logging every 100 steps: 100)
        self.heartbeat: Heartbeat | None = None  # the latest, since its last step
        self.timed_out = False  # a collective of this rank timed out (it was waiting)
        self.measured: dict[str, int] = {}  # per source kind, the last step whose figures counted

    def add(self, t: float, *, step: int | None = None, step_s: float | None = None,
            compute_s: float | None = None, wait_s: float | None = None, window_s: float,
            source: str = "", clocked: bool = True, measure: bool = True, kind: str = "probe",
            restart: bool = False) -> None:
        """One report of this rank from a source ``kind`` ("probe", "log").

        ``measure`` False: a sign of life only (an eval bar), no figures of
        a training step. Each kind's figures count once per step (the log
        line and the probe line of one step are two reports of it, in
        either order). ``restart``: a step below that kind's last is a
        relaunch (probe lines count training steps only), not an eval bar.
        """
        if self.last_seen is None or t > self.last_seen:
            self.last_seen = t
        if source:
            self.source = source
        seen = self.measured.get(kind)
        if restart and step is not None and seen is not None and step < seen:
            self.measured.clear()
            self.last_step = None
            self.intervals.clear()
            self._seconds.clear()
            self._steps.clear()
            self.usual_s, self.usual_n = None, 1
            seen = None
        if step is not None and (self.last_step is None or step > self.last_step):
            if (clocked and self.last_step is not None and self.last_step_time is not None
                    and t > self.last_step_time):
                self._interval(t - self.last_step_time, step - self.last_step)
            self.last_step = step
            self.last_step_time = t
            self.heartbeat = None
            self.timed_out = False
        fresh = step is None or seen is None or step > seen
        if step is not None and fresh:
            self.measured[kind] = step
        if not measure or not fresh:
            return
        if compute_s is None and step_s is not None and wait_s is not None and step_s >= wait_s:
            compute_s = step_s - wait_s
        series = self.series
        if step_s is not None or compute_s is not None or wait_s is not None:
            newest = self.newest
            for name, value in (("step", step_s), ("compute", compute_s), ("wait", wait_s)):
                if value is not None:
                    series[name].append((t, value))
                    if t > newest[name]:
                        newest[name] = t
                        if t > self._newest_any[name]:
                            self._newest_any[name] = t
        # Most step lines carry no figure, and most logs have none to prune.
        if series["step"] or series["compute"] or series["wait"]:
            self._prune(t, window_s)

    def _prune(self, t: float, window_s: float) -> None:
        start = t - window_s
        for values in self.series.values():
            while values and values[0][0] < start:
                values.popleft()

    def values(self, name: str, start: float, end: float) -> list[float]:
        """A figure's values reported from ``start`` to ``end`` (data time), sorted."""
        series = self.series[name]
        if not series:
            return []
        if series[0][0] >= start and self.newest[name] <= end:
            return sorted([v for _, v in series])
        return sorted([v for (at, v) in series if start <= at <= end])

    def median(self, name: str, start: float, end: float) -> float | None:
        """Median of a figure's values reported from ``start`` to ``end``."""
        values = self.values(name, start, end)
        return sorted_median(values) if values else None

    def _interval(self, seconds: float, steps: int) -> None:
        # ``seconds`` > 0 (a later stamp than the last step's): never NaN,
        # so the sorted lists order as ``sorted`` would.
        intervals = self.intervals
        if len(intervals) == _INTERVALS_KEPT:
            old_s, old_n = intervals[0]
            intervals.append((seconds, steps))  # (the oldest drops out)
            # The value leaving is often the one coming (a steady cadence:
            # whole seconds, one step): then the sorted list and its median
            # stay as they are. Else the median of the full window is its
            # middle two (``sorted_median`` of an even count, inline: on a
            # 64-rank log most step lines come here).
            if old_s != seconds:
                self.usual_s = _slid(self._seconds, old_s, seconds)
            if old_n != steps:
                usual_n = int(_slid(self._steps, float(old_n), float(steps)))
                self.usual_n = usual_n if usual_n > 1 else 1
            return
        secs, steps_ = self._seconds, self._steps
        intervals.append((seconds, steps))
        insort(secs, seconds)
        insort(steps_, float(steps))
        self.usual_s = sorted_median(secs)
        self.usual_n = max(1, int(sorted_median(steps_)))

    def waits_on_others(self) -> bool:
        """Its latest word since its last step: it waits in a collective."""
        where = self.waiting_in()
        return where is not None and is_collective(where)

    def waiting_in(self) -> str | None:
        if self.heartbeat is not None and self.heartbeat.waiting_in:
            return self.heartbeat.waiting_in
        return "a timed-out collective" if self.timed_out else None


# What ``take_log_steps`` reads of a line and of a rank's state, for its
# loop in C (``rank_steps``; the state's fields in the kernel's order).
_LINE_FIELDS = columns_of("rank", "time", "source", "step", "clocked").at
_RANK_FIELDS = ("last_seen", "source", "last_step", "last_step_time", "heartbeat", "timed_out", "measured", "series",
                "intervals", "_seconds", "_steps", "usual_s", "usual_n")
if KERNELS is not None:  # (and ``_interval`` of a full window, the common case, in C too)
    KERNELS.set_rank_state(RankState, _RANK_FIELDS, deque, _INTERVALS_KEPT, _slid, RankState._interval)
_RANK_STEPS = KERNELS.rank_steps if KERNELS is not None else None


def take_log_steps(ranks: dict[int, RankState], steps: Sequence[Progress], window_s: float,
                   new_rank: Callable[[int, float], RankState | None]) -> tuple[bool, bool]:
    """Step lines without figures (no ``step_seconds``), in order, as
    ``Straggler._progress`` and ``RankState.add`` take them one at a time:
    the batching contract's commit (``Straggler.quiet_steps``) of a run of
    many ranks' lines. ``new_rank(rank, t)``: the state of a rank not yet
    followed (None: not followed, the line is dropped).

    One loop, not two calls with keywords per line: on a 64-rank log a
    run of 64 lines touches some 40 ranks once each, so nothing per rank
    amortizes; what a line costs is what is left. Returns (a line named a
    step: the job steps, ``_stopped`` ends; a training step above its
    rank's last: an eval or a save ends, ``_phase``). ``add``'s rules for
    such a line, in its order (``tests/core/test_ranks_speed_intake.py``
    holds the two to the same state):

    * any line: ``last_seen`` (the latest), ``source`` (where non-empty);
    * a step above the rank's ``last_step``: a cadence interval (a clocked
      line, later than the last step), then the step, its time, and no
      heartbeat or timed-out collective since;
    * a step above the last one its ``"log"`` figures counted
      (``measured``): counted now, and a clocked one prunes the window.
    """
    stepped = advanced = False
    start = 0
    if _RANK_STEPS is not None and type(steps) is list:
        # The loop below in C (``parsers.native``), the same calls and
        # stores in the same order; it stops before a line it cannot take
        # whole, and the loop goes on from there.
        start, stepped, advanced = _RANK_STEPS(ranks, steps, _LINE_FIELDS, window_s, new_rank, rank_of_source)
    for p in islice(steps, start, None):
        rank = p.rank
        if rank is None:
            rank = rank_of_source(p.source)
            if rank is None:
                continue
        state = ranks.get(rank)
        t = p.time
        if state is None:
            state = new_rank(rank, t)
            if state is None:
                continue
        seen_at = state.last_seen
        if seen_at is None or t > seen_at:
            state.last_seen = t
        source = p.source
        if source:
            state.source = source
        step = p.step
        if step is None:
            continue
        stepped = True
        measured = state.measured
        counted = measured.get("log")
        fresh = counted is None or step > counted
        last = state.last_step
        if last is None or step > last:
            if fresh:
                advanced = True
            at = state.last_step_time
            if p.clocked and last is not None and at is not None and t > at:
                state._interval(t - at, step - last)
            state.last_step = step
            state.last_step_time = t
            state.heartbeat = None
            state.timed_out = False
        if fresh:
            measured["log"] = step
            if p.clocked:
                series = state.series
                if series["step"] or series["compute"] or series["wait"]:
                    state._prune(t, window_s)
    return stepped, advanced
