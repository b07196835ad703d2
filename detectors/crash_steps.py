"""The last step lines of every stream, as the crash detectors read them.

Both crash detectors (``crash`` and ``fx_tracing``) tell a relaunch from a
program that lived on by the progress lines around a crash
(``crash_incident.restarted``), and ``crash`` also proves a caught
traceback by them. Those lines are the same for both: ``build_detectors``
gives the two one ``StepLines``; both hand it every step line, and the
second hand-over of the same event is answered from the first (split and
stored once, whichever detector comes first or is there at all). A
detector made alone records into its own.

>>> from dflash_watch.parsers.events import Progress
>>> lines = StepLines()
>>> p = Progress(1.0, "train.log:7", step=3, rank=0)
>>> lines.add(p)
(('train.log', 0), 7)
>>> lines.add(p)  # the other crash detector: the same record, not a second one
(('train.log', 0), 7)
>>> list(lines.seen[("train.log", 0)])
[(7, 3, 1.0)]
"""

from __future__ import annotations

from collections import OrderedDict, deque

from ..parsers.events import Progress

# Streams (file, rank) remembered, and step lines kept per stream.
STREAMS_MAX = 256
LINES_KEEP = 16

StreamKey = tuple[str, "int | None"]


class StepLines:
    """(file, rank) -> its last ``LINES_KEEP`` step lines as (line, step,
    data time), for at most ``STREAMS_MAX`` streams (the oldest go)."""

    __slots__ = ("seen", "_last", "_last_at")

    def __init__(self) -> None:
        self.seen: OrderedDict[StreamKey, deque[tuple[int, int | None, float]]] = OrderedDict()
        self._last: Progress | None = None  # the event recorded last, and where
        self._last_at: tuple[StreamKey, int] = (("", None), -1)

    def add(self, p: Progress) -> tuple[StreamKey, int]:
        """Record ``p`` (once, however many detectors hand it over); its
        stream and line. Once per training step: keep it to a split, a
        lookup and an append."""
        if p is self._last:
            return self._last_at
        file, _, number = p.source.rpartition(":")
        line = int(number) if number.isdigit() else -1
        key = (file, p.rank)
        seen = self.seen.get(key)
        if seen is None:
            seen = self.seen[key] = deque(maxlen=LINES_KEEP)
            if len(self.seen) > STREAMS_MAX:
                self.seen.popitem(last=False)
        seen.append((line, p.step, p.time))
        self._last, self._last_at = p, (key, line)
        return key, line
