"""Progress lines of one shape, read together as columns.

A log prints one progress line shape thousands of times. The stream sets
such lines aside in the cursor's run (``parsers.cursor``) and reads them
here, before the next line that does anything else, as ``feed`` would one
by one: same values, same order (tests/core/test_stream_columns.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, compress, islice, repeat
from operator import eq, getitem, is_, is_not, itemgetter
from typing import Any, cast

from .clock import JITTER_S
from .cursor import Bare, Cursor, Lane, Ranked, Redrawn
from .events import Progress, new_progress
from .line_times import LineTimes
from .native import KERNELS
from .one_line import body_shape, read_padding, read_progress
from .progress import ProgressPattern, column_plan, value_columns
from .ranks import rank_span
from .step_clock import DRIFT_MIN_S, DRIFT_SHARE, StepClock
from .timestamps import TimeParser

# Lane lines in a row below this are read one by one when their lane's
# columns were not read for the whole run: columns of a stretch this short
# cost more (benchmarks/bench_replay.py, the quiet shape).
_COLUMNS_MIN = 2
# A ``Ranked``'s lane and cut (``read_lanes``: a run of ranked lines read in C).
_LANE, _CUT = itemgetter(0), itemgetter(1)


def lane_of(
    line: str, shape: bytes, times: TimeParser, bodies: dict[bytes, Lane | None]
) -> Lane | Bare | Ranked | None:
    """The column reading of ``line``'s shape, if its lines can have one
    (the stream has checked that they are progress and nothing else): no
    '\\r', dated by a zone-less ISO stamp or a US one (``11/29/2026
    10:00:00``, Python logging's) at the start, or right after an ASCII
    rank prefix (``[rank5]:``, cut where ``ranks.rank_span`` says); or
    with no stamp at all (``Bare``: a tqdm bar between stamped lines,
    dated by the lines before it). ``bodies``: the lanes of ranked lines'
    texts by shape, one lane for all ranks."""
    if b"\r" in shape:
        return None
    if shape[:1] == b"[":
        span = rank_span(line)
        if span is None:
            return None
        rank_at, rank_end, cut = span
        text_shape = body_shape(line, line[cut:], shape)
        if text_shape is None:
            return None
        if text_shape in bodies:
            lane = bodies[text_shape]
        else:
            found = lane_of(line[cut:], text_shape, times, bodies)
            lane = bodies[text_shape] = found if type(found) is Lane else None
        return None if lane is None else Ranked(lane, cut, rank_at, rank_end)
    if TimeParser.stampless(shape):
        bare = column_plan(line, shape)
        return None if bare is None else Bare(bare)
    frac_len = TimeParser.iso_layout(shape)
    run = times.iso_run
    if frac_len is None:
        frac_len = TimeParser.us_layout(shape)
        run = times.us_run
        if frac_len is None:
            return None
    fast = column_plan(line, shape)
    return None if fast is None else Lane(fast, frac_len, run)


def redrawn_lane(shape: bytes, state: Lane | Bare | Ranked | Redrawn | None) -> Redrawn | None:
    """The lane of ``shape``, a shape of tqdm bars drawn again unchanged
    (``X\\rX``), given the lane of one state's shape (``state``): its
    ``Bare`` lane, the very one plain bars of that shape are read in (one
    stretch with them), when it reads a step. The stream asks it of a shape
    of plain progress lines whose every state has one shape, itself plain
    progress and nothing else.

    Read as the one state its text shows, such a line gives what
    ``redraw_states`` gives it: a state drawn again as it was is not read
    again, and with a step the dedupe is by the step alone. A line of the
    shape whose states differ is read whole, as before (``one_state``)."""
    if type(state) is not Bare or state.fast.step < 0:
        return None
    return Redrawn(state, shape)


def one_state(cur: Cursor) -> None:
    """The run's ``Redrawn`` lines whose states are one text, each as that
    state in its lane (the whole line kept in ``cur.redrawn``, read whole
    where the columns leave it); the others as plain progress lines. In
    place, before the run is read."""
    lines, lanes, whole = cur.run_lines, cur.run_lanes, cur.redrawn
    # (the run's Redrawn lines found in C: the others, most of it, are not walked)
    for i in compress(range(len(lanes)), map(is_, map(type, lanes), repeat(Redrawn))):
        lane = cast("Redrawn", lanes[i])
        line = lines[i]
        last = line[line.rfind("\r") + 1 :]
        if line == "\r".join([last] * (line.count("\r") + 1)):
            whole[i] = line
            lines[i] = last
            lanes[i] = lane.lane
        else:
            lanes[i] = lane.shape


def read_lanes(cur: Cursor, dating: LineTimes, pattern: ProgressPattern | None) -> None:
    """Progress events of the cursor's run, as ``feed`` would make them one
    by one (same values, same order), onto ``cur.events``; the cursor's
    clock and line count moved past them, its run emptied.

    A run holds lane lines (their ``Lane``, or a ``Ranked`` for a line with
    a rank prefix: read after it, in the lane of its text, so that ranks of
    every width make one stretch) and plain progress lines between them
    (their shape, bytes), read on their own in their place. Each lane's
    numbers are read as columns once for the whole run (``map`` in C; entry
    i is line i's value whatever lines sit beside it), and sliced for each
    stretch of it; where any of its lines leaves the fast path, each stretch
    is read as columns on its own. Stamps are read stretch by stretch in the
    file's order (``TimeParser.iso_run`` or ``us_run``: the parser keeps a
    year for glog lines), line numbers by counting newlines between the
    lines. Lines of a ``Bare`` lane have no stamp: each is dated by the
    lines before it (``LineTimes.bare_times``), not clocked. A line the
    columns cannot take (a value check fails, a stamp does not parse) and
    the rest of its stretch are read one at a time, exactly as ``feed``
    reads any progress line.

    A run without rank prefixes whose lanes all have their columns (the
    common case: issue 20's step lines and tqdm bars, a stretch of a line or
    two each) is read in one pass in the file's order (``_read_in_order``),
    with next to nothing to do per stretch; any other run stretch by stretch
    (``_read_by_stretch``). Same events either way
    (tests/core/test_lanes_in_order.py).
    """
    lines, starts = cur.run_lines, cur.run_starts
    ranked = cur.run_lanes
    kinds = set(map(type, ranked))
    if Redrawn in kinds:
        one_state(cur)
        kinds = set(map(type, ranked))
    # Each line's lane and its text after its rank prefix: the run itself
    # when it holds no ranked line (no copy on the hot path).
    lanes = cast("list[Lane | Bare | bytes]", ranked)
    bodies = lines
    if Ranked in kinds:
        # Ranked lines go by the lane of their text: all ranks together.
        # (No ``Redrawn`` is left: ``one_state`` resolved them above.)
        if len(kinds) == 1:  # every line ranked (a many-rank log): in C, each ``lane.lane`` and ``line[p.cut:]``
            lanes = cast("list[Lane | Bare | bytes]", list(map(_LANE, ranked)))
            bodies = list(map(getitem, lines, map(slice, map(_CUT, ranked), repeat(None))))
        else:
            lanes = cast(
                "list[Lane | Bare | bytes]", [lane.lane if isinstance(lane, Ranked) else lane for lane in ranked]
            )
            bodies = [line[p.cut :] if isinstance(p, Ranked) else line for line, p in zip(lines, ranked)]
    groups = _groups(bodies, lanes)
    # Every run line's number at once: newlines counted between them in C.
    numbers = None if KERNELS is None else KERNELS.line_numbers(cur.view, cur.count_pos, cur.count_no, starts)
    if numbers is None:
        numbers = list(
            accumulate(map(cur.view.count, repeat("\n"), [cur.count_pos, *starts[:-1]], starts), initial=cur.count_no)
        )
        del numbers[0]
    # No rank prefix, and columns for the whole run of every lane with more
    # than one line in it (the common case): one pass in the file's order.
    if lanes is ranked and all(group[0] is not None or group[2] == 1 for group in groups.values()):
        _read_in_order(cur, dating, pattern, lanes, groups, numbers)
    else:
        _read_by_stretch(cur, dating, pattern, lanes, bodies, groups, numbers)
    cur.count_pos = starts[-1]
    cur.count_no = numbers[-1]
    # In place: the stream's loop holds these lists in locals. Nothing read
    # above keeps them (columns and stamps are new lists).
    cur.clear_run()


def _read_in_order(
    cur: Cursor, dating: LineTimes, pattern: ProgressPattern | None, lanes: list[Lane | Bare | bytes],
    groups: dict[int, list[Any]], numbers: list[int],
) -> None:
    """``read_lanes`` of a run without rank prefixes in which every lane of
    two lines or more has columns for the whole run (``_groups``): in the
    file's order, with next to nothing to do per stretch. A progress shape
    between stamped lines (step lines and tqdm bars, each with lines between)
    makes a stretch of every line or two.

    Each lane's events come out of one ``map`` of ``Progress`` over its
    columns (in C), fed each line's time as it is read: stamped lines one by
    one in ``TimeParser._minute_run``'s way (a stretch's first line parsed,
    unless it repeats the minute read last: ``minute_for``), a ``Bare``
    stretch at once by ``LineTimes.bare_times``. Lines of a lane with one
    line in the run, plain progress lines (bytes) and the rest of a stretch
    once a stamp does not parse are read on their own, as
    ``_read_by_stretch`` reads them; the clock and the count of stamped
    lines move as there. Where the stream's clocks let it (``cur.final``),
    each event is built at its final time: a bar run on by the step clock,
    a step line held behind it (``parsers.final_times``), not built again."""
    lines, starts, ends = cur.run_lines, cur.run_starts, cur.run_ends
    events = cur.events
    append = events.append
    prefix = dating.prefix
    times = dating.times
    # The stream's clocks, where events get their final times as they are
    # built (``parsers.final_times``): each line's time and ``clocked`` go
    # into the lane's ``map`` as it is read, and the clocks move here.
    final = cur.final
    # id -> (its lines' times so far, its events as they are read, its
    # one-line stamp reading (None: a Bare lane), fraction digits, 10 ** those,
    # its lines' clocked so far (``final``), its steps and step times).
    made: dict[int, tuple[list[float], Iterator[Progress], Any, int, int, list[bool], Any, Any]] = {}
    for key, (whole, _, count, lane, picks) in groups.items():
        if whole is None:
            continue  # its one line is read on its own
        steps, totals, tokens, losses, metrics, seconds, *after = whole
        lane_stamps: list[float] = []  # grows as the lines are read: ``map`` reads on
        lane_clocked: list[bool] = []  # likewise, where ``final`` dates them
        sources = _sources(prefix, numbers, 0, len(numbers), picks)
        lane_events = map(
            new_progress, lane_stamps, sources, steps, totals, tokens, losses, repeat(None), metrics, seconds,
            repeat(type(lane) is not Bare) if final is None else lane_clocked,  # clocked: a stamp of its own
            *after,
        )
        if isinstance(lane, Bare):
            if final is None:
                made[key] = (lane_stamps, lane_events, None, 0, 1, lane_clocked, None, None)
            else:  # the step clock reads each line's step and step time
                made[key] = (
                    lane_stamps, lane_events, None, 0, 1, lane_clocked, _listed(steps, count), _listed(seconds, count)
                )
        else:
            made[key] = (
                lane_stamps, lane_events, times.run_parse(lane.run), lane.frac_len, 10**lane.frac_len,
                lane_clocked, None, None,
            )
    floor = 0.0  # the hold's floor (``final``), moved here, set back before others date
    stamped = False  # a stamped line passed since the step clock was told
    unstamped: Any = None
    if final is not None:
        final.catch_up(events)  # what the stream read before the run
        floor = final.clock.floor
        unstamped = final.steps.unstamped
    clock = cur.clock
    covered = cur.covered
    text = cur.text  # one-line Bare stretches are dated here (``LineTimes.bare_times``' loop)
    fallback = cur.fallback_time
    latest = dating.latest
    own = 0
    prev: object = None
    entry = None
    stamps: list[float] = []  # of the stretch's lane (set with ``entry``)
    clocked: list[bool] = []  # likewise (``final``)
    lane_steps: Any = None
    lane_seconds: Any = None
    progress: Iterator[Progress] = iter(())
    parse: Any = None
    frac_len = scale = 0
    minute: str | None = None
    base = 0.0
    entering = False  # the minute was taken over from before the stretch: not entered yet
    alone = False  # the rest of the stretch is read on its own (a stamp did not parse)
    total = len(lanes)
    # The common lines in C where built (``parsers.native``): stamped lines
    # of the minute held and Bare lines, read as below (a Bare stretch line
    # by line: the same values); it stops before any other line, which the
    # loop below reads, then hands on again.
    in_order = KERNELS.in_order if KERNELS is not None else None
    state: list[Any] = []
    minute_for, minute_entered = times.minute_for, times.minute_entered
    stamped_now = None if final is None else final.steps.stamped
    # The kernel reads the time parser and the step clock behind ``latest``
    # and ``unstamped`` itself (their slots, as the methods do) where they
    # are the classes it knows; else it calls them.
    clocks = (
        (times, None if final is None else final.steps, DRIFT_MIN_S, DRIFT_SHARE)
        if type(dating) is LineTimes and type(times) is TimeParser
        and (final is None or type(final.steps) is StepClock)
        else None
    )
    i = 0
    while i < total:
        if in_order is not None and not alone:
            state[:] = (prev, clock, covered, floor, stamped, own, minute, base, entering)
            i = in_order(
                i, lanes, made, lines, starts, ends, events, state, text, fallback, latest, minute_for,
                minute_entered, stamped_now, unstamped, JITTER_S, clocks,
            )
            was = prev
            prev, clock, covered, floor, stamped, own, minute, base, entering = state
            if prev is not was:  # it went on in another lane: its entry here too
                entry = made.get(id(prev))
                if entry is not None:
                    stamps, progress, parse, frac_len, scale, clocked, lane_steps, lane_seconds = entry
            if i >= total:
                break
        lane = lanes[i]
        if lane is not prev:
            prev = lane
            entry = made.get(id(lane))
            alone = False
            if entry is not None:
                stamps, progress, parse, frac_len, scale, clocked, lane_steps, lane_seconds = entry
                if parse is None:  # a Bare stretch: dated at once, by the lines before each
                    j = i + 1
                    while j < total and lanes[j] is lane:
                        j += 1
                    bare: Sequence[float]
                    one = j == i + 1
                    if one:
                        # One bar between stamped lines (the common case): ``bare_times``
                        # of one line, inline, on the locals (no slices, no call).
                        start = starts[i]
                        if covered <= start:
                            if covered < start:
                                found = latest(text, covered, start)
                                if found is not None:
                                    clock = found
                            covered = ends[i] + 1
                        bare = (fallback if clock is None else clock,)
                    else:
                        cur.clock = clock
                        cur.covered = covered
                        bare = dating.bare_times(cur, starts[i:j], ends[i:j])
                        clock = cur.clock
                        covered = cur.covered
                    if final is None:
                        stamps.extend(bare)
                    else:  # run on by the step clock, then held as ``EventClock.hold`` holds them
                        if stamped:
                            final.steps.stamped()
                            stamped = False
                        k = len(stamps)  # the lane's line of the stretch's first
                        for time in bare:
                            time, was_clocked = unstamped(time, lane_steps[k], lane_seconds[k])
                            k += 1
                            if time >= floor:
                                floor = time
                            else:
                                if floor - time > JITTER_S:
                                    was_clocked = False
                                time = floor
                            stamps.append(time)
                            clocked.append(was_clocked)
                    if one:
                        append(next(progress))
                    else:
                        events.extend(islice(progress, j - i))
                    i = j
                    continue
                held = times.minute_for(frac_len)
                entering = held is not None
                minute, base = held if held is not None else (None, 0.0)
        if entry is not None and not alone:  # a stamped line, its stamp read as _minute_run reads it
            s = lines[i]
            second = s[17:19]
            if s[:16] == minute and second < "60":  # (a str is never None)
                if frac_len:
                    stamp = base + int(second) + int(s[20 : 20 + frac_len]) / scale
                else:
                    stamp = base + int(second) + 0.0
                if entering:
                    times.minute_entered()
                    entering = False
            else:
                value = parse(s)
                if value is not None:
                    stamp = value
                    minute, base = times.minute()
                    entering = False
                else:
                    alone = True
            if not alone:
                own += 1
                clock = stamp
                covered = ends[i] + 1
                if final is None:
                    stamps.append(stamp)
                elif stamp >= floor:  # as ``EventClock.hold`` dates it
                    floor = stamp
                    stamps.append(stamp)
                    clocked.append(True)
                    stamped = True
                else:
                    stamps.append(floor)
                    clocked.append(not floor - stamp > JITTER_S)
                    stamped = True
                append(next(progress))
                i += 1
                continue
        # On its own, as ``_read_by_stretch`` reads it.
        cur.clock = clock
        cur.covered = covered
        dating.own_count += own
        own = 0
        if final is not None:  # the clocks as the lines before left them
            if stamped:
                final.steps.stamped()
                stamped = False
            final.clock.floor = floor
            final.done = len(events)
        line = lines[i]
        if type(lane) is bytes:
            read_progress(cur, dating, pattern, line, starts[i], ends[i], numbers[i], None, None, lane)
        else:
            if entry is not None:  # its entry in the lane's columns, not read
                stamps.append(0.0)
                clocked.append(True)
                next(progress)
            whole = cur.redrawn.get(i) if cur.redrawn else None
            if whole is not None:  # a redrawn line, read whole as a plain one
                read_progress(cur, dating, pattern, whole, starts[i], ends[i], numbers[i], None, None, None)
            elif read_progress(cur, dating, pattern, line, starts[i], ends[i], numbers[i], None, None, None) is None:
                read_padding(cur, dating, line, starts[i], ends[i], numbers[i], None, None)
        if final is not None:  # what it made, dated in its place
            final.catch_up(events)
            floor = final.clock.floor
        clock = cur.clock
        covered = cur.covered
        i += 1
    cur.clock = clock
    cur.covered = covered
    dating.own_count += own
    if final is not None:
        if stamped:
            final.steps.stamped()
        final.clock.floor = floor
        final.done = len(events)


def _listed(column: Any, count: int) -> list[Any]:
    """A column of ``count`` lines as a list: itself, or the one value of a
    ``repeat`` (``value_columns``: infinite, shared by every lane) ``count`` times."""
    return column if type(column) is list else list(islice(column, count))


def _read_by_stretch(
    cur: Cursor, dating: LineTimes, pattern: ProgressPattern | None, lanes: list[Lane | Bare | bytes],
    bodies: list[str], groups: dict[int, list[Any]], numbers: list[int],
) -> None:
    """``read_lanes`` stretch by stretch: each stretch's columns (sliced
    from its lane's, or read for the stretch alone) and stamps read at once."""
    lines, starts, ends = cur.run_lines, cur.run_starts, cur.run_ends
    ranked = cur.run_lanes
    events = cur.events
    prefix = dating.prefix
    total = len(lines)
    columns: Sequence[Any] | None
    i = 0
    while i < total:
        lane = lanes[i]
        if isinstance(lane, bytes):  # a plain progress line, read on its own
            read_progress(cur, dating, pattern, lines[i], starts[i], ends[i], numbers[i], None, None, lane)
            i += 1
            continue
        j = i + 1
        while j < total and lanes[j] is lane:
            j += 1
        stretch = bodies[i:j] if i or j < total else bodies
        ranks: Any = repeat(None)
        is_ranked = type(ranked[i]) is Ranked
        if is_ranked:  # their ranks, read where the shape puts them
            prefixes = cast("list[Ranked]", ranked[i:j])  # a stretch of one lane: all ranked
            ranks = None if KERNELS is None else KERNELS.rank_numbers(lines, i, prefixes)  # (in C where built)
            if ranks is None:
                ranks = [int(line[p.rank_at : p.rank_end]) for line, p in zip(lines[i:j], prefixes)]
        group = groups[id(lane)]
        whole, taken = group[:2]
        group[1] = taken + j - i
        done = 0
        if whole is None and j - i < _COLUMNS_MIN:
            columns = None  # a line or two: read on their own, cheaper than columns
        elif whole is None:
            columns = value_columns(lane.fast, stretch)
        else:
            stop = taken + j - i
            columns = [column[taken:stop] if type(column) is list else column for column in whole]
        bare = type(lane) is Bare
        if columns is not None:
            if isinstance(lane, Bare):
                times = dating.bare_times(cur, starts[i:j], ends[i:j])
            else:
                times = lane.run(stretch, lane.frac_len)
            done = len(times)
        if done:
            # Columns after step_seconds are the fields after ``clocked``.
            steps, totals, tokens, losses, metrics, seconds, *after = columns  # type: ignore[misc]
            sources = _sources(prefix, numbers, i, i + done, None)
            events.extend(
                map(
                    new_progress, times, sources, steps, totals, tokens, losses, ranks, metrics, seconds,
                    repeat(not bare), *after,
                )
            )
            if not bare:  # stamped lines: their own clock (a Bare lane's moved it itself)
                dating.own_count += done
                cur.clock = times[-1]
                cur.covered = ends[i + done - 1] + 1
        for m in range(i + done, j):
            # As the stream reads a lane line on its own (``_line_events``):
            # its progress, else its padding (a lane may hold ``pad_eff``);
            # a ranked line by the rank and text its prefix was cut into.
            line = lines[m]
            if cur.redrawn and m in cur.redrawn:  # a redrawn line, read whole as a plain one
                read_progress(cur, dating, pattern, cur.redrawn[m], starts[m], ends[m], numbers[m], None, None, None)
                continue
            rank = ranks[m - i] if is_ranked else None
            split = bodies[m] if is_ranked else None
            if read_progress(cur, dating, pattern, line, starts[m], ends[m], numbers[m], rank, split, None) is None:
                read_padding(cur, dating, line, starts[m], ends[m], numbers[m], rank, split)
        i = j


def _sources(prefix: str, numbers: list[int], lo: int, hi: int, picks: list[bool] | None) -> Iterable[str]:
    """The sources (``name:line``) of ``numbers[lo:hi]``, those picked (None:
    all): each written once in C where the kernels are (``parsers.native``),
    else a digit string and a concatenation each; the same strings."""
    made = None if KERNELS is None else KERNELS.sources(prefix, numbers, lo, hi, picks)
    if made is not None:
        return made
    taken = numbers[lo:hi]
    return map(prefix.__add__, map(str, taken if picks is None else compress(taken, picks[lo:hi])))


def _groups(lines: list[str], lanes: list[Lane | Bare | bytes]) -> dict[int, list[Any]]:
    """Each lane of the run (by id) -> [its lines' columns or None (read per
    stretch), how many of its lines were taken so far, how many it has, the
    lane, which of the run's lines are its (a bool each)]. A run holds a few
    lanes: each one's lines are picked out in C (``compress``), its line
    numbers too (``_read_in_order``), by the one list of picks."""
    picked = None if KERNELS is None else KERNELS.lane_groups(lines, lanes)  # one pass in C for all lanes
    if picked is None:
        ids = list(map(id, lanes))
        picked = {}
        # The lanes by id, plain lines (bytes) left out in C.
        found: dict[int, Any] = dict(compress(zip(ids, lanes), map(is_not, map(type, lanes), repeat(bytes))))
        for key, lane in found.items():
            picks = list(map(eq, ids, repeat(key)))
            picked[key] = (lane, list(compress(lines, picks)), picks)
    out: dict[int, list[Any]] = {}
    for key, (lane, group_lines, picks) in picked.items():
        count = len(group_lines)
        out[key] = [value_columns(lane.fast, group_lines) if count > 1 else None, 0, count, lane, picks]
    return out
