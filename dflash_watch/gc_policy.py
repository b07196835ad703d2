"""How Python's cyclic collector runs while we read in bulk or sit beside a run.

Almost nothing we allocate is cyclic: events, lines and alerts are freed by
their reference counts the moment they are dropped. The collector still
walks every young object each 700 allocations, and a full collection walks
the whole heap (the parsers' tables, numpy, Textual's DOM) whenever it has
grown by a quarter. Replay allocates an event or two per line, so at the
default thresholds the collector ran tens of thousands of times per million
lines: ~10-20% of a replay's CPU on the progress-heavy shape (issue 20,
measured with ``gc.disable()`` against the default, alerts identical).

Two policies, one home:

* ``settle`` -- for a process that lives beside a run (the dashboard):
  collect once, freeze what exists (it lives as long as the process) and
  collect the young every ``LIVE_YOUNG_THRESHOLD`` allocations.
* ``bulk_read`` -- for a replay or a catch-up: freeze what exists and
  collect the young every ``BULK_YOUNG_THRESHOLD`` allocations while the
  block runs, then put the thresholds back. Cyclic garbage made meanwhile
  is still collected, only in larger batches; memory stays bounded.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

LIVE_YOUNG_THRESHOLD = 10_000  # allocations between young collections (Python: 700)
BULK_YOUNG_THRESHOLD = 50_000

# Live, a catch-up's bulk reads run on the tailer's thread while the
# dashboard settles on its own: one lock, and what ``settle`` chose is
# what every bulk read ends with.
_lock = threading.Lock()
_depth = 0  # bulk reads running now
_before: tuple[int, int, int] = (700, 10, 10)  # thresholds to put back when the last one ends
_thaw = False  # whether the last one ends by thawing what the first one froze


def settle(young: int = LIVE_YOUNG_THRESHOLD) -> None:
    """Collect once, exempt everything that exists from later collections, raise the young threshold.

    For a process that lives beside a run: what exists a few seconds in
    lives as long as it does. Inside a bulk read, the raised threshold and
    the freeze are what the bulk read ends with.
    """
    global _before, _thaw
    with _lock:
        gc.collect()
        gc.freeze()
        if _depth:
            _before = (max(young, _before[0]), *_before[1:])  # type: ignore[assignment]
            _thaw = False
        else:
            first, second, third = gc.get_threshold()
            gc.set_threshold(max(young, first), second, third)


@contextmanager
def bulk_read(young: int = BULK_YOUNG_THRESHOLD) -> Iterator[None]:
    """Collect less often while the block reads in bulk; restore the collector after.

    What was frozen before stays frozen; what this froze is thawed again, so
    a library caller's heap is collected as before once the block ends.
    Nested and concurrent blocks share one raise: the last to end restores.
    """
    global _depth, _before, _thaw
    with _lock:
        if not _depth:
            _before = gc.get_threshold()
            _thaw = not gc.get_freeze_count()
            if _thaw:
                gc.freeze()
            gc.set_threshold(max(young, _before[0]), *_before[1:])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if not _depth:
                gc.set_threshold(*_before)
                if _thaw:
                    gc.unfreeze()
