"""Progress lines of one shape, read together as columns.

A log prints one progress line shape thousands of times. The stream sets
such lines aside in the cursor's run (``parsers.cursor``) and reads them
here, before the next line that does anything else, as ``feed`` would one
by one: same values, same order (tests/core/test_stream_columns.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, repeat
from typing import Any

from .cursor import Cursor, Lane
from .events import Progress
from .line_times import LineTimes
from .progress import ProgressPattern, column_plan, progress_values, value_columns
from .progress.ops import Values
from .progress.redraws import redraw_values
from .timestamps import TimeParser

# Lane lines in a row below this are read one by one: columns cost more
# (benchmarks/bench_replay.py, the quiet shape).
_COLUMNS_MIN = 2


def lane_of(line: str, shape: bytes, times: TimeParser) -> Lane | None:
    """The column reading of ``line``'s shape, if its lines can have one
    (the stream has checked that they are progress and nothing else): no
    rank prefix, no '\\r', dated by a zone-less ISO stamp or a US one
    (``11/29/2026 10:00:00``, Python logging's) at the start."""
    if shape[:1] == b"[" or b"\r" in shape:
        return None
    frac_len = TimeParser.iso_layout(shape)
    run = times.iso_run
    if frac_len is None:
        frac_len = TimeParser.us_layout(shape)
        run = times.us_run
        if frac_len is None:
            return None
    fast = column_plan(line, shape)
    return None if fast is None else Lane(fast, frac_len, run)


def read_lanes(cur: Cursor, dating: LineTimes, pattern: ProgressPattern | None) -> None:
    """Progress events of the cursor's run, as ``feed`` would make them one
    by one (same values, same order), onto ``cur.events``; the cursor's
    clock and line count moved past them, its run emptied.

    A run holds lane lines (their ``Lane``) and plain progress lines between
    them (their shape, bytes), read on their own in their place. Each lane's
    numbers are read as columns once for the whole run (``map`` in C; entry
    i is line i's value whatever lines sit beside it), and sliced for each
    stretch of it; where any of its lines leaves the fast path, each stretch
    is read as columns on its own. Stamps are read stretch by stretch in the
    file's order (``TimeParser.iso_run`` or ``us_run``: the parser keeps a
    year for glog lines), line numbers by counting newlines between the
    lines. A line the columns cannot take (a value check fails, a stamp does
    not parse) and the rest of its stretch are read one at a time, exactly
    as ``feed`` reads any progress line.
    """
    lines, starts, ends, lanes = cur.run_lines, cur.run_starts, cur.run_ends, cur.run_lanes
    events = cur.events
    progress = dating.progress
    prefix = dating.prefix
    total = len(lines)
    found: Values | None
    columns: Sequence[Any] | None
    groups = _groups(lines, lanes)
    # Every run line's number at once: newlines counted between them in C.
    numbers = list(
        accumulate(map(cur.view.count, repeat("\n"), [cur.count_pos, *starts[:-1]], starts), initial=cur.count_no)
    )
    del numbers[0]
    i = 0
    while i < total:
        lane = lanes[i]
        if isinstance(lane, bytes):  # a plain progress line, read on its own
            line = lines[i]
            if "\r" in line:  # a tqdm bar redrawn in place: every state, as ``feed``
                for found in redraw_values(line, pattern):
                    events.append(progress(found, cur, starts[i], ends[i], line, numbers[i]))
            else:
                found = progress_values(line, None, pattern, lane)
                if found is not None:
                    events.append(progress(found, cur, starts[i], ends[i], line, numbers[i]))
            i += 1
            continue
        j = i + 1
        while j < total and lanes[j] is lane:
            j += 1
        fast, frac_len, run = lane
        stretch = lines[i:j] if i or j < total else lines
        group = groups[id(lane)]
        whole, taken = group
        group[1] = taken + j - i
        done = 0
        if j - i < _COLUMNS_MIN:
            columns = None  # a line or two: read on their own, cheaper than columns
        elif whole is None:
            columns = value_columns(fast, stretch)
        else:
            stop = taken + j - i
            columns = [column[taken:stop] if type(column) is list else column for column in whole]
        if columns is not None:
            times = run(stretch, frac_len)
            done = len(times)
        if done:
            # Columns after step_seconds are the fields after ``clocked``.
            steps, totals, tokens, losses, metrics, seconds, *after = columns  # type: ignore[misc]
            sources = [prefix + str(number) for number in numbers[i : i + done]]
            events.extend(
                map(
                    Progress, times, sources, steps, totals, tokens, losses, repeat(None), metrics, seconds,
                    repeat(True), *after,
                )
            )
            dating.own_count += done
            cur.clock = times[-1]
            cur.covered = ends[i + done - 1] + 1
        for m in range(i + done, j):
            line = lines[m]
            found = progress_values(line)
            if found is not None:
                events.append(progress(found, cur, starts[m], ends[m], line, numbers[m]))
        i = j
    cur.count_pos = starts[-1]
    cur.count_no = numbers[-1]
    # In place: the stream's loop holds these lists in locals. Nothing read
    # above keeps them (columns and stamps are new lists).
    cur.clear_run()


def _groups(lines: list[str], lanes: list[Lane | bytes]) -> dict[int, list[Any]]:
    """Each lane of the run (by id) -> [its lines' columns or None (read per
    stretch), how many of its lines were taken so far]."""
    members: dict[int, tuple[Lane, list[str]]] = {}
    for m, lane in enumerate(lanes):
        if not isinstance(lane, bytes):
            member = members.get(id(lane))
            if member is None:
                members[id(lane)] = (lane, [lines[m]])
            else:
                member[1].append(lines[m])
    return {
        key: [value_columns(lane.fast, group_lines) if len(group_lines) > 1 else None, 0]
        for key, (lane, group_lines) in members.items()
    }
