"""Columns: many progress lines of one shape at once.

A training log prints the same progress line thousands of times; the
stream hands a run of lines of one shape here and gets columns back, each
number converted by ``map`` in C instead of a Python call per line. Same
values as ``fast.run_fast`` line by line; where any line would
leave the fast path (a value check fails), the answer is None and the
stream reads those lines one at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import add, le, mul
from typing import Any

from ..events import IT_S, SAMPLES_S, TOK_S
from ..native import KERNELS
from .fast import INF, FastPlan
from .plans import PLAN_LINE_MAX, plan_of

# One column: an entry per line, or a ``repeat`` of one value.
Column = Iterable[Any]
# ``value_columns``: steps, totals, tokens_per_s, losses, metrics,
# step_seconds, rates, rate_units, elapsed.
Columns = tuple[Column, Column, Column, Column, Column, Column, Column, Column, Column]
# ``progress_columns``: the first six.
FieldColumns = tuple[Column, Column, Column, Column, Column, Column]


def column_plan(line: str, shape: bytes) -> FastPlan | None:
    """The fast plan of ``line``'s shape when its lines can be read as
    columns: built-in formats, no rank prefix inside, and a step, loss,
    tokens/s, samples/s or a tqdm bar's rate on every line (so no line of
    the shape reads as None)."""
    if len(line) > PLAN_LINE_MAX:
        return None
    rank_at, ops, fast = plan_of(line, shape)
    if not ops or fast is None or rank_at >= 0:
        return None
    if fast.step < 0 and fast.loss < 0 and fast.tokens < 0 and fast.samples < 0 and fast.rate < 0:
        return None
    return fast


def _whole(value: float) -> bool:
    return math.isfinite(value) and value >= 0 and value == int(value)


def _whole_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0 and value == int(value)


def _rates_ok(values: list[float]) -> bool:
    """``run_fast``'s check of a rate, ``v >= 0 and v != inf``, on every
    value, in C: ``0.0 <= v`` is ``v >= 0`` (NaN fails both)."""
    return all(map(le, repeat(0.0), values)) and INF not in values


class _Cut:
    """The numbers of lines of one shape, a column at a time: ``int`` or
    ``float`` of each line's slice, read by the compiled kernel where it
    takes the column (``parsers.native``), else cut and converted by
    ``map`` in C. Either way the same values."""

    __slots__ = ("fast", "lines")

    def __init__(self, fast: FastPlan, lines: list[str]) -> None:
        self.fast = fast
        self.lines = lines

    def floats(self, i: int) -> list[float]:
        return self._numbers(i, False)

    def ints(self, i: int) -> list[int]:
        return self._numbers(i, True)

    def _numbers(self, i: int, ints: bool) -> list[Any]:
        if KERNELS is not None and self.fast.spans:
            start, stop = self.fast.spans[i]
            read = KERNELS.cut_numbers(self.lines, start, stop, ints)
            if read is not None:
                return read
        return list(map(int if ints else float, map(self.fast.columns[i], self.lines)))


def _scaled(values: list[float], scale: float) -> list[float]:
    # x * 1.0 is x for every float (NaN, -0.0 and inf included).
    # ``scale.__rmul__(v)`` is ``v * scale``: run_fast's product, in C.
    return values if scale == 1.0 else list(map(scale.__rmul__, values))


def _counts(cut: _Cut, i: int, digits_only: bool, ok: Callable[[float], bool]) -> list[int] | None:
    """Steps or totals: int() of plain digits; else whole floats that pass
    ``ok``, or None when one does not."""
    if digits_only:
        return cut.ints(i)
    values = cut.floats(i)
    return list(map(int, values)) if all(map(ok, values)) else None


def _clock_column(parts: list[list[int]]) -> list[float]:
    """``clock_seconds`` of each line's clock parts (hours first, when
    shown), in C: the same whole seconds (exact in ints), the same float."""
    if len(parts) == 3:
        hours, minutes, seconds = parts
        whole = map(add, map(add, map(mul, hours, repeat(3600)), map(mul, minutes, repeat(60))), seconds)
    else:
        minutes, seconds = parts[0], parts[1]  # as clock_seconds reads any other
        whole = map(add, map(mul, minutes, repeat(60)), seconds)
    return list(map(float, whole))


def _per_second(seconds: Iterable[float]) -> list[float | None]:
    return [1.0 / s if s else None for s in seconds]


def _it_s(rate: float | None) -> str | None:
    return None if rate is None else IT_S


def value_columns(fast: FastPlan, lines: list[str]) -> Columns | None:
    """``(steps, totals, tokens_per_s, losses, metrics, step_seconds, rates,
    rate_units, elapsed)`` of ``lines``, all of one shape whose
    ``column_plan`` is ``fast``: each a list with one entry per line, or a
    ``repeat`` of one value where the shape has no such field. None where
    ``run_fast`` would fall back on any line. Entry i of every column is
    ``run_fast``'s value of line i."""
    # A column at a time: no tuple per line (``zip(*rows)`` makes one per
    # line, then one per column: twice the time on runs of thousands).
    cut = _Cut(fast, lines)
    none = repeat(None)
    steps: Column = none
    totals: Column = none
    tokens: Column = none
    losses: Column = none
    seconds: Column = none
    metrics: Column = repeat(())
    samples: Column = none
    i = fast.step
    if i >= 0:
        counted = _counts(cut, i, fast.step_is_int, _whole)
        if counted is None:
            return None
        steps = counted
    i = fast.total
    if i >= 0:
        counted = _counts(cut, i, fast.total_is_int, _whole_positive)
        if counted is None:
            return None
        totals = counted
        if fast.total_is_int and 0 in counted:  # (no new list where no line has one)
            totals = [v or None for v in counted]  # "step 3/0": no total
    i = fast.tokens
    if i >= 0:
        tokens = _scaled(cut.floats(i), fast.tokens_scale)
        if not _rates_ok(tokens):
            return None
    i = fast.loss
    if i >= 0:
        losses = _scaled(cut.floats(i), fast.loss_scale)
    i = fast.seconds
    if i >= 0:
        scale, unit = fast.seconds_scale, fast.seconds_unit
        seconds = [x * scale * unit for x in cut.floats(i)]  # run_fast's order
        if not _rates_ok(seconds):
            return None
    i = fast.samples
    if i >= 0:
        samples = _scaled(cut.floats(i), fast.samples_scale)
        if not _rates_ok(samples):
            return None
    steps_rates: list[float | None] | None = None
    i = fast.rate
    if i >= 0:  # a tqdm bar's shown rate (``run_fast``'s order and checks)
        shown = _scaled(cut.floats(i), fast.rate_scale)
        if not _rates_ok(shown):
            return None
        turned = [1.0 / v if v else None for v in shown]
        if fast.rate_inverse:
            seconds, steps_rates = shown, turned
        else:
            seconds, steps_rates = turned, list(shown)
    elapsed: Column = none
    if fast.elapsed:
        elapsed = _clock_column([cut.ints(j) for j in fast.elapsed])
    if fast.metrics:
        pairs = [list(zip(repeat(name), _scaled(cut.floats(j), scale))) for name, j, scale in fast.metrics]
        metrics = list(zip(*pairs))
    # run_fast's rate: tokens/s, else samples/s, else 1 / step time.
    rates: Column = none
    units: Column = none
    if fast.tokens >= 0:
        rates, units = tokens, repeat(TOK_S)
    elif fast.samples >= 0:
        rates, units = samples, repeat(SAMPLES_S)
    elif steps_rates is not None:
        # The printed rate; None only for 0 s/it, whose step time (0) gives none either.
        rates = steps_rates
        units = list(map(_it_s, rates))
    elif fast.seconds >= 0:
        rates = _per_second(seconds)
        units = list(map(_it_s, rates))
    return steps, totals, tokens, losses, metrics, seconds, rates, units, elapsed


def progress_columns(fast: FastPlan, lines: list[str]) -> FieldColumns | None:
    """``(steps, totals, tokens_per_s, losses, metrics, step_seconds)``:
    the first six of ``value_columns``, the stream's columns before rates."""
    columns = value_columns(fast, lines)
    return None if columns is None else columns[:6]
