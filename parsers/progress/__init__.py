"""Progress lines of training loops, whatever framework printed them.

The throughput and stall detectors need step, the run's rate, loss and the
step interval, and every framework prints them differently: ``key: value``
fields split by ``|`` (nanochat, nanotron, Megatron, DFlash), by spaces
(torchtitan, modded-nanogpt), Python dict reprs (HF Trainer), tqdm bars,
JSON lines. This module is the face of the readers behind it:

- ``parsers.numbers``: the number grammar (commas, SI, tqdm's ``2.1e+4``, clocks);
- ``keys``: what key names mean;
- ``ops`` / ``readers`` / ``tqdm_bar`` / ``plans``: a line's *plan*, worked
  out once per line shape, and the cache of plans by line shape;
- ``run``: a plan applied to a line (the reference);
- ``fast`` / ``columns``: the same answers, faster,
  one line or many lines of one shape at once;
- ``pattern``: a user's own regex instead of all of it.

Two forms of the answer. ``progress_values`` gives a line's *values*: the
fields of a ``Progress`` after time and source but for ``clocked``
(``VALUES`` names them; ``progress_from`` builds the event).
``progress_fields`` gives their first seven, through ``step_seconds``:
the face the stream was built on, which ``Progress(time, source, *fields,
clocked)`` fills. ``value_columns`` and ``progress_columns`` are the same
pair for columns.
"""

from __future__ import annotations

from typing import Final, Literal, overload

from ..events import Progress, new_progress
from ..numbers import parse_number
from .columns import column_plan, progress_columns, value_columns
from .fast import FastPlan, run_fast
from .ops import Fields, RunOps, Values, runnable, yields_run
from .pattern import ProgressPattern
from .plans import PLAN_LINE_MAX, PLANS, line_shape, plan, plan_of
from .run import TOKENS_PER_SAMPLE, run

# Cheap substrings: a line without any of them is not a progress line. The
# stream scanner searches the whole chunk for these before any per-line work.
# (tqdm bars always show a rate, ``it/s`` or ``s/it``, even ``?it/s``; bars
# of tokens hold "tok"; of samples, "samples/s" or "s/sample".)
CANDIDATES: tuple[str, ...] = (
    "tep", "teration", "loss", "Loss", "tok", "it/s", "s/it", "samples/s", "sample/s", "s/sample",
    "samples_per_s",
)

# The names of ``progress_values``' entries: Progress's fields after time
# and source, without ``clocked``.
VALUES: tuple[str, ...] = (
    "step", "total_steps", "tokens_per_s", "loss", "rank", "metrics", "step_seconds", "rate", "rate_unit",
    "elapsed_s",
)
FIELDS: Final = 7  # progress_fields: the first seven values

# The plan cache, for tests that look into it (the same dict).
_PLANS = PLANS


def _run_fast(fast: FastPlan, ops: RunOps, line: str, rank: int | None, rank_at: int) -> Fields | None:
    """The fast runner's first seven values (``fast.run_fast``)."""
    found = run_fast(fast, ops, line, rank, rank_at)
    return None if found is None else found[:FIELDS]


def progress_possible(line: str) -> bool:
    """False when no line of this one's shape can be progress (built-in
    formats): every part the stream would read has an empty plan, whatever
    its digits. Lets the stream skip such shapes (evaluation bars redrawn
    six times a line) after one look. ``line``: the text after the rank
    prefixes (the stream's one split). Each part is planned into the plan
    cache (``plan_of``), where the reading of its first line finds it."""
    parts = [part for part in line.split("\r") if part.strip()] if "\r" in line else [line]
    for part in parts:
        if len(part) > PLAN_LINE_MAX:
            return True
        if any(map(yields_run, plan_of(part, line_shape(part))[1])):
            return True
    return False


def progress_values(
    line: str, rank: int | None = None, pattern: ProgressPattern | None = None, shape: bytes | None = None
) -> Values | None:
    """``parse_progress`` without the time, source and ``clocked``: the
    values named by ``VALUES`` (``(step, total_steps, tokens_per_s, loss,
    rank, metrics, step_seconds, rate, rate_unit, elapsed_s)``), or None.
    The stream builds the Progress (``progress_from``) once it knows the
    line's time. ``shape``, if given, must be ``line_shape(line)``."""
    if pattern is not None:
        found = _by_pattern(pattern, line, rank, values=True)
        if found is not None and len(found) == FIELDS:
            return (*found, None, None, None)
        return found
    if len(line) > PLAN_LINE_MAX:
        rank_at, named = plan(line)
        ops, fast = runnable(named), None
    else:
        rank_at, ops, fast = plan_of(line, line_shape(line) if shape is None else shape)
    if not ops:
        return None
    if fast is not None:
        return run_fast(fast, ops, line, rank, rank_at)
    return run(ops, line, rank, rank_at)


def progress_fields(
    line: str, rank: int | None = None, pattern: ProgressPattern | None = None, shape: bytes | None = None
) -> Fields | None:
    """The first seven of ``progress_values``: ``(step, total_steps,
    tokens_per_s, loss, rank, metrics, step_seconds)``, or None."""
    if pattern is not None:
        return _by_pattern(pattern, line, rank, values=False)
    found = progress_values(line, rank, None, shape)
    return None if found is None else found[:FIELDS]


@overload
def _by_pattern(pattern: ProgressPattern, line: str, rank: int | None, values: Literal[False]) -> Fields | None: ...
@overload
def _by_pattern(
    pattern: ProgressPattern, line: str, rank: int | None, values: Literal[True]
) -> Fields | Values | None: ...
def _by_pattern(pattern: ProgressPattern, line: str, rank: int | None, values: bool) -> Fields | Values | None:
    """A user's pattern on the line: the text after its rank prefix, said
    by ``rank`` (the stream's one split). ``fields`` is all a pattern needs
    (the stream's tests hand in their own); ``values``, where it has one,
    for ``progress_values``."""
    text = line.strip()
    if not text:
        return None
    # The stream's tests hand in patterns with ``fields`` only.
    read = getattr(pattern, "values", None) if values else None
    if read is None:
        return pattern.fields(text, rank)
    found: Values | None = read(text, rank)
    return found


def progress_from(time: float, source: str, values: Values, clocked: bool = True) -> Progress:
    """The Progress of a line's ``progress_values``, dated."""
    return new_progress(time, source, *values[:FIELDS], clocked, *values[FIELDS:])


def parse_progress(
    line: str, time: float, source: str, rank: int | None = None,
    pattern: ProgressPattern | None = None,
) -> Progress | None:
    """The progress a line reports, or None. Never raises on any text.

    ``pattern`` (from the config) replaces the built-in formats entirely, so
    that a user who names their format gets exactly that and nothing else.
    """
    found = progress_values(line, rank, pattern)
    return None if found is None else progress_from(time, source, found)


__all__ = [
    "CANDIDATES", "FIELDS", "TOKENS_PER_SAMPLE", "VALUES", "ProgressPattern", "column_plan", "line_shape",
    "parse_number", "parse_progress", "progress_columns", "progress_fields", "progress_from",
    "progress_possible", "progress_values", "value_columns",
]
