"""A progress bar redrawn in place with ``'\\r'``: every state it showed.

HF Trainer and Lightning's TQDMProgressBar draw one tqdm bar for a whole
epoch (often the whole run) and end it with a newline only when it closes.
Each ``'\\r'`` state is a reading of the run's rate, so a drop shows in the
states long before the newline comes: replay reads them all from the line
(``LogStream``), and live reads those drawn since the last look
(``Monitor.feed_partial``). Both read the states alike, here.

States carry no timestamp. Live, the states read in one look happened
since the previous look: ``redraw_times`` dates them by the bar's own
elapsed counter back from the moment they were read, or, for a bar that
shows none, spreads them over the time since the previous look.

>>> states = redraw_values("\\r1.00ktok [00:01, 2.00ktok/s]\\r1.40ktok [00:02, 400tok/s]")
>>> [(v[VALUES.index("rate")], v[VALUES.index("elapsed_s")]) for v in states]
[(2000.0, 1.0), (400.0, 2.0)]
>>> redraw_times([1.0, 2.0], since=99.0, now=100.0)
[99.0, 100.0]
>>> redraw_times([None, None], since=99.0, now=100.0)
[99.5, 100.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import groupby, repeat
from typing import Final

from ..glued import glued_at
from ..ranks import split_rank
from . import VALUES, progress_values
from .columns import column_plan, value_columns
from .ops import Values
from .pattern import ProgressPattern
from .plans import line_shape

__all__ = ["ELAPSED", "SPREAD_MAX_S", "VALUES", "redraw_states", "redraw_times", "redraw_values"]

# ``VALUES.index("elapsed_s")``, written as a literal so that a type checker
# knows what ``values[ELAPSED]`` holds (tests/core/test_progress_rates.py checks it).
ELAPSED: Final = 9
# A line of this many states or more has its states of one shape read as
# columns (``value_columns``, in C), not one ``progress_values`` each: HF
# Trainer's bar, written to a file, is one line of a state per step.
COLUMNS_MIN = 16
# States without a counter of their own are spread over at most this long
# before the look that read them: after a silence of minutes, the states
# of one look were drawn just before it, not over the whole silence.
SPREAD_MAX_S = 2.0


def redraw_values(line: str, pattern: ProgressPattern | None = None) -> list[Values]:
    """The ``progress_values`` of each ``'\\r'`` state of ``line``, in order,
    one per step shown (a bar redraws a step more than once: the newer state
    wins). A state that does not parse (the dict HF prints after its bar,
    glued) is skipped; so is a state with no step equal to the one before it.
    A rank prefix (``[rank3]:``) at the line's start is every state's rank.

    For a caller that holds a whole line (the live tailer's partial line);
    the stream hands ``redraw_states`` its own split of the prefix."""
    rank = None
    if line[:1] == "[":
        rank, line = split_rank(line)
    elif "\r" in line:
        # A log line glued to the redraws is no state of the bar: the stream
        # reads it, with its own stamp, once its newline comes.
        cut = glued_at(line)
        if cut:
            line = line[:cut]
    return redraw_states(line, rank, pattern)


def redraw_states(line: str, rank: int | None, pattern: ProgressPattern | None = None) -> list[Values]:
    """``redraw_values`` of ``line``, the text after the rank prefixes,
    said by ``rank`` (the stream's one split, ``parsers.ranks``).

    A state drawn again as it was (tqdm redraws a bar unchanged: issue 20's
    bars are ``X\\rX``) is not read again: the same text gives the same
    values, and with a step it replaces the one before by that same step.
    (Without a step, the values themselves are compared, and a NaN in a
    fresh reading never equals the last one's: those are read again.)"""
    out: list[Values] = []
    last: object = None
    seen: str | None = None  # the state read last, its step known
    segments = line.split("\r")
    read = _column_values(segments, rank) if pattern is None and len(segments) >= COLUMNS_MIN else None
    for i, segment in enumerate(segments):
        if segment == seen:
            continue  # out[-1] is what it would be replaced by
        if not segment.strip():
            continue
        found = read[i] if read is not None and read[i] is not None else progress_values(segment, rank, pattern)
        seen = segment if found is not None and found[0] is not None else None
        if found is None:
            continue
        key = found[0] if found[0] is not None else found
        if key == last:
            out[-1] = found
            continue
        last = key
        out.append(found)
    return out


def _column_values(segments: list[str], rank: int | None) -> list[Values | None]:
    """``progress_values(segment, rank)`` of each segment that a stretch of
    segments of one shape gives as columns (``value_columns``: entry i is
    ``run_fast``'s value of line i), else None (read on its own). Only a
    shape with a step is taken: ``run_fast`` never reads None on it, and
    a bar always shows its step."""
    out: list[Values | None] = [None] * len(segments)
    at = 0
    for shape, group in groupby(map(line_shape, segments)):
        n = len(list(group))
        if n >= 2:
            fast = column_plan(segments[at], shape)
            if fast is not None and fast.step >= 0:
                columns = value_columns(fast, segments[at : at + n])
                if columns is not None:
                    steps, totals, tokens, losses, metrics, seconds, rates, units, elapsed = columns
                    # The order of ``VALUES``, a tuple per state in C.
                    out[at : at + n] = zip(
                        steps, totals, tokens, losses, repeat(rank), metrics, seconds, rates, units, elapsed
                    )
        at += n
    return out


def redraw_times(elapsed: Sequence[float | None], since: float | None, now: float) -> list[float]:
    """Times for states read at ``now`` and drawn after ``since`` (the
    previous look; None: none), oldest first, never going back.

    The newest state is at ``now``. With the bar's elapsed counter on every
    state, an older one is as much earlier as its counter says (but not
    before ``since``); without, they are spread evenly over the time since
    ``since`` (at most ``SPREAD_MAX_S``), or all at ``now`` on a first look.
    """
    k = len(elapsed)
    if not k:
        return []
    floor = since if since is not None and since <= now else -math.inf
    if all(e is not None and math.isfinite(e) for e in elapsed):
        # Back from the newest: each state as much earlier as the counter
        # says; where it went back (the next epoch's bar on the same line)
        # the gap is unknown and taken as none.
        times = [now] * k
        for i in range(k - 2, -1, -1):
            gap = elapsed[i + 1] - elapsed[i]  # type: ignore[operator]
            times[i] = times[i + 1] - (gap if gap > 0 else 0.0)
    elif since is not None and since < now:
        start = max(since, now - SPREAD_MAX_S)
        step = (now - start) / k
        times = [start + step * (i + 1) for i in range(k)]
    else:
        times = [now] * k
    out: list[float] = []
    prev = floor
    for t in times:
        t = min(max(t, prev), now)
        out.append(t)
        prev = t
    return out
