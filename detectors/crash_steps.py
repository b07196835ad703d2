"""The last step lines of every stream, as the crash detectors read them.

Both crash detectors (``crash`` and ``fx_tracing``) tell a relaunch from a
program that lived on by the progress lines around a crash
(``crash_incident.restarted``), and ``crash`` also proves a caught
traceback by them. Those lines are the same for both: ``build_detectors``
gives the two one ``StepLines``; both hand it every step line, and the
second hand-over of the same event is answered from the first (stored
once, whichever detector comes first or is there at all). A detector made
alone records into its own.

They are read only when a crash comes, and one stream keeps only its last
``LINES_KEEP`` lines, so a line is not split when it arrives: it waits (at
most ``PENDING_MAX`` of them, or ``PENDING_PER_STREAM`` per stream where
there are many: a log of 64 ranks) and is worked in with the others when
the record is read or the wait is full (``seen``). Then a stream's older
lines, which its newer ones would push out anyway, are never split at all
(the lines of one file: not even their sources, ``_one_file``). The
latest time of the lines is kept here too (``latest``: the detectors' clock
of step lines). So per training step the two detectors cost an append, and
the batching contract (``base.StepCommit``) takes a run of step lines in one
``extend`` (``add_run``).

>>> from dflash_watch.parsers.events import Progress
>>> lines = StepLines()
>>> p = Progress(1.0, "train.log:7", step=3, rank=0)
>>> lines.add(p)
>>> lines.add(p)  # the other crash detector: the same record, not a second one
>>> list(lines.seen[("train.log", 0)])
[(7, 3, 1.0)]
>>> run = [Progress(2.0, "train.log:8", step=4, rank=0), Progress(2.5, "train.log:9", step=5, rank=0)]
>>> lines.add_run(run)
>>> lines.add_run(run)  # the other crash detector's commit
>>> list(lines.seen[("train.log", 0)])
[(7, 3, 1.0), (8, 4, 2.0), (9, 5, 2.5)]
>>> where(run[1])
(('train.log', 0), 9)
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable, Sequence
from itertools import chain, islice
from operator import is_
from typing import TypeVar

from ..parsers.events import Progress
from ..parsers.native import KERNELS
from ..parsers.step_columns import TIMES, columns_of, read

# Streams (file, rank) remembered, and step lines kept per stream.
STREAMS_MAX = 256
LINES_KEEP = 16
# Step lines waiting to be worked in (``StepLines.seen``): enough that most
# of a stream's lines are pushed out before they are split (16 of 256 of one
# stream are kept), few enough to hold (the events themselves) and to copy.
PENDING_MAX = 256
# With many streams (a log of 64 ranks) as many per stream: up to
# ``PENDING_PER_STREAM`` lines each wait (4 times what is kept, so three in
# four are never split), at most ``PENDING_MOST`` in all.
PENDING_PER_STREAM = 4 * LINES_KEEP
PENDING_MOST = 16 * PENDING_MAX

_WHERE = columns_of("source", "rank")  # what ``_tails`` reads of each line

StreamKey = tuple[str, "int | None"]
Lines = deque[tuple[int, "int | None", float]]
K = TypeVar("K", bound=Hashable)


def _row(number: str, p: Progress) -> tuple[int, int | None, float]:
    """What a stream keeps of a step line: its line (``number``, the text
    after its file in its source; -1: none), step and data time."""
    return int(number) if number.isdigit() else -1, p.step, p.time


def where(p: Progress) -> tuple[StreamKey, int]:
    """The stream (file, rank) and line number of a step line (-1: none)."""
    file, _, number = p.source.rpartition(":")
    return (file, p.rank), int(number) if number.isdigit() else -1


class StepLines:
    """(file, rank) -> its last ``LINES_KEEP`` step lines as (line, step,
    data time), for at most ``STREAMS_MAX`` streams (the oldest go); and the
    latest data time of them all (the crash detectors' clock of step lines)."""

    __slots__ = ("_seen", "_latest", "_pending", "_last", "_cap", "_timed")

    def __init__(self) -> None:
        self._seen: OrderedDict[StreamKey, Lines] = OrderedDict()
        self._latest = float("-inf")
        # Lines handed over but not yet in ``_seen``, in order (< ``_cap``).
        self._pending: list[Progress] = []
        self._last: Progress | None = None  # the event recorded last
        self._cap = PENDING_MAX  # lines that wait at most (``_settle`` sets it by the streams)
        self._timed = 0  # the waiting lines whose times ``_latest`` holds already

    @property
    def seen(self) -> OrderedDict[StreamKey, Lines]:
        """Every stream's last lines, the waiting ones worked in."""
        if self._pending:
            self._settle()
        return self._seen

    @property
    def latest(self) -> float:
        """The latest data time of the lines recorded (-inf: none; a NaN
        time is never the latest, as ``if t > latest`` line by line). The
        waiting lines' times are folded in, the lines still wait: a crash
        reads the clock (``CrashDetector._now``), and working the lines in
        at every crash of a log would split most of them."""
        self._fold()
        return self._latest

    def _fold(self) -> None:
        """Fold the waiting lines' times not folded yet into ``_latest``
        (``max`` folds left as ``if t > latest`` does, so in any parts)."""
        pending = self._pending
        if len(pending) > self._timed:
            times = read(pending if not self._timed else pending[self._timed:], TIMES)[0]
            self._latest = max(chain((self._latest,), times))
            self._timed = len(pending)

    def add(self, p: Progress) -> None:
        """Record ``p`` (once, however many detectors hand it over). Once
        per training step: an identity test and an append."""
        if p is not self._last:
            self._last = p
            pending = self._pending
            pending.append(p)
            if len(pending) >= self._cap:
                self._settle()

    def forget(self, file: str) -> None:
        """Drop the lines of ``file`` (each of its ranks' streams): its lines
        are counted from 1 again (``Renumbered``), and the old ones, with
        larger numbers, would read as written after the new file's. The
        waiting lines are worked in first, so only ``file``'s go; the
        clock (``latest``) keeps their times."""
        seen = self.seen
        for key in [key for key in seen if key[0] == file]:
            del seen[key]

    def recorded(self, steps: Sequence[Progress]) -> bool:
        """Whether the run's last line is the line recorded last: then
        ``add_run`` would take the run for handed over already. Asked before a
        run is taken (a run ending in a line recorded before, the same event
        twice, goes one line at a time)."""
        return steps[-1] is self._last

    def add_run(self, steps: Sequence[Progress]) -> None:
        """Record a run of step lines as ``add`` would one at a time, once
        however many detectors hand it over (its last line recorded last:
        handed over already; see ``recorded``). The lines wait as ``add``'s
        would, worked in at the same counts, so the record is the same."""
        last = self._last
        if steps[-1] is last:
            return
        if steps[0] is last or any(map(is_, steps, islice(steps, 1, None))):
            for p in steps:  # the same event twice in a row: recorded once
                self.add(p)
            return
        pending = self._pending
        room = self._cap - len(pending)
        if len(steps) < room:
            pending.extend(steps)
        else:
            start = 0
            while start < len(steps):
                pending.extend(steps[start:start + room])
                start += room
                if len(pending) >= self._cap:
                    self._settle()
                room = self._cap
        self._last = steps[-1]

    def _settle(self) -> None:
        """Work the waiting lines in as one ``add`` at a time would have.
        With few streams, all seen before, only each one's last
        ``LINES_KEEP`` lines are split and appended (``_tails``); else every
        line, oldest first (``_walk``: most are kept anyway, or a new stream
        takes its place in the order and pushes the oldest out). Then as
        many lines may wait as the streams call for (``PENDING_PER_STREAM``)."""
        pending = self._pending
        self._fold()
        if len(self._seen) * LINES_KEEP * 2 > len(pending) or not self._tails():
            self._walk()
        pending.clear()
        self._timed = 0
        self._cap = min(PENDING_MOST, max(PENDING_MAX, PENDING_PER_STREAM * len(self._seen)))

    def _tails(self) -> bool:
        """Append each stream's last ``LINES_KEEP`` waiting lines, found
        newest first until every stream has them; False (nothing done) when
        a stream is new."""
        pending, seen = self._pending, self._seen
        sources, ranks = read(pending, _WHERE)
        file = _one_file(sources)
        if file is not None:
            return self._tails_of(file, ranks)
        keys = [(source.rpartition(":")[0], rank) for source, rank in zip(sources, ranks)]
        streams = set(keys)
        if not all(key in seen for key in streams):
            return False
        for key, tail in _last_of_each(keys, streams).items():
            lines = seen[key]
            for i in tail:
                p = pending[i]
                number = p.source.rpartition(":")[2]
                lines.append(_row(number, p))
        return True

    def _tails_of(self, file: str, ranks: list[int | None]) -> bool:
        """``_tails`` of lines of one ``file`` (``_one_file``; ``ranks``, the
        lines' ranks), told apart by their rank alone: no key is made, nor
        a source cut, for a line that is not kept."""
        pending, seen = self._pending, self._seen
        cut = len(file) + 1  # each source is ``file:`` and its number
        if ranks.count(ranks[0]) == len(ranks):  # one stream (a log of one rank): its last lines
            lines = seen.get((file, ranks[0]))
            if lines is None:
                return False  # a new stream
            for p in pending[-LINES_KEEP:]:
                number = p.source[cut:]
                lines.append(_row(number, p))
            return True
        streams: dict[int | None, Lines] = {}
        for rank in set(ranks):
            lines = seen.get((file, rank))
            if lines is None:
                return False  # a new stream
            streams[rank] = lines
        if KERNELS is not None and KERNELS.stream_tails(pending, ranks, streams, cut, LINES_KEEP):
            return True  # the loops below in C (``parsers.native``): the same lines appended
        for rank, tail in _last_of_each(ranks, streams).items():
            lines = streams[rank]
            for i in tail:
                p = pending[i]
                number = p.source[cut:]
                lines.append(_row(number, p))
        return True

    def _walk(self) -> None:
        """Append every waiting line, oldest first (``add``'s old loop)."""
        seen = self._seen
        get = seen.get  # (once, not per line: a 64-rank log walks every line)
        for p in self._pending:
            file, _, number = p.source.rpartition(":")
            key = (file, p.rank)
            lines = get(key)
            if lines is None:
                lines = seen[key] = deque(maxlen=LINES_KEEP)
                if len(seen) > STREAMS_MAX:
                    seen.popitem(last=False)
            lines.append(_row(number, p))


def _last_of_each(keys: list[K], streams: Iterable[K]) -> dict[K, list[int]]:
    """The indices of the last ``LINES_KEEP`` of ``keys`` equal to each of
    ``streams`` (all found among them), oldest first: searched newest first
    and stopped once every stream has its lines, so a long run of waiting
    lines is not walked whole."""
    tails: dict[K, list[int]] = {key: [] for key in streams}
    short = len(tails)  # streams with fewer than LINES_KEEP lines found
    for i in range(len(keys) - 1, -1, -1):
        tail = tails[keys[i]]
        if len(tail) < LINES_KEEP:
            tail.append(i)
            if len(tail) == LINES_KEEP:
                short -= 1
                if not short:
                    break
    for tail in tails.values():
        tail.reverse()
    return tails


def _one_file(sources: list[str]) -> str | None:
    """The file when every source is ``file:`` and more without a colon,
    else None: ``where`` of each line (but the number after it), for the
    lines of one log, in a few passes of C over the sources joined, with
    no string made per line.

    No source holds a newline (the join has ``n - 1``), so every newline is
    a join; ``newline + file:`` is found ``n - 1`` times (as often as
    splitting there would make ``n`` parts), so every join is followed by
    ``file:``: each source starts with it. None holds a colon past it (the
    colons count), so ``rpartition`` splits each there."""
    prefix = sources[0].rpartition(":")[0] + ":"
    n = len(sources)
    text = "\n".join(sources)
    if (not text.startswith(prefix) or text.count("\n") != n - 1 or text.count("\n" + prefix) != n - 1
            or text.count(":") != n * prefix.count(":")):
        return None
    return prefix[:-1]
