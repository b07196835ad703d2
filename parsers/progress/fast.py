"""Fast plans: the common plan, run without the op loop.

Most plans are a handful of plain numbers (no comma groups, no tqdm, no
alternatives) with at most one source per field. Same shape, same offsets:
one ``itemgetter`` of slices cuts every number out of the line in C, and
the fields are picked by index. Only the value checks stay in Python; when
one fails (a step that is not whole, a rate that is not finite) the
general runner decides, so the result is always ``run.run``'s.

A tqdm bar of iterations (``it/s``, ``s/it``, ``?it/s``: the training
loop's) has a fast form too: its count and total, its shown rate (SI
scale, turned over for ``s/it``) and its elapsed clock, cut as numbers
like any other (``Tqdm``). Plans with what the fast form does not do --
bars of tokens or samples, alternatives, printed iteration rates in text,
token/sample counts, tokens/s *and* samples/s (their ratio) -- have no
fast form: the general runner reads them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ..events import IT_S, SAMPLES_S, TOK_S
from ..ranks import rank_digits
from . import keys
from .ops import Metric, Ops, Put, Rate, RunOps, Step, Tqdm, Values
from .run import run

INF = math.inf


@dataclass(frozen=True, slots=True)
class FastPlan:
    cut: Callable[[str], tuple[str, ...]]  # itemgetter of slices
    step: int  # index into the cut numbers, -1: none
    step_is_int: bool  # from a "step N" op (digits only), not a named value
    total: int
    total_is_int: bool
    tokens: int
    tokens_scale: float
    loss: int
    loss_scale: float
    seconds: int
    seconds_scale: float
    seconds_unit: float  # applied after the scale, in run's order (floats round)
    samples: int
    samples_scale: float
    metrics: tuple[tuple[str, int, float], ...]  # (name, index, scale)
    # A tqdm bar of iterations: its shown rate (index, SI scale, ``s/it``),
    # which gives the step time and the printed iteration rate, and its
    # elapsed clock (indices of its parts, hours first; () when none).
    rate: int = -1
    rate_scale: float = 1.0
    rate_inverse: bool = False
    elapsed: tuple[int, ...] = ()
    # One getter per number (``cut``'s slices one by one): ``value_columns``
    # cuts a column at a time, a ``map`` in C that makes no tuple per line.
    columns: tuple[Callable[[str], str], ...] = ()
    # The same numbers' (start, stop), for the compiled kernel that reads a
    # column without cutting it (``parsers.native``, ``cut_numbers``).
    spans: tuple[tuple[int, int], ...] = ()


def fast_plan(ops: Ops, line: str) -> FastPlan | None:
    """The fast form of ``ops``, or None where only ``run`` is exact."""
    spans: list[slice] = []
    slots: dict[str, tuple[Any, ...]] = {
        "step": (-1, False), "total": (-1, False), "tokens": (-1, 1.0), "loss": (-1, 1.0),
        "seconds": (-1, 1.0, 1.0), "samples": (-1, 1.0),
    }
    taken: set[str] = set()
    metrics: list[tuple[str, int, float]] = []

    def number(a: int, b: int) -> int:
        spans.append(slice(a, b))
        return len(spans) - 1

    def claim(name: str, value: tuple[Any, ...]) -> bool:
        if name in taken:
            return False  # two sources for one field: order decides, leave it to run
        taken.add(name)
        slots[name] = value
        return True

    def key_name(key_a: int, key_b: int) -> str | None:
        # A key with a digit may differ between lines of a shape. (Read on
        # the line: the shape's offsets are bytes, the plan's characters.)
        key = line[key_a:key_b]
        return None if any("0" <= c <= "9" for c in key) else key

    bar: dict[str, Any] = {}

    for op in ops:
        if type(op) is Metric:
            a, b, comma, scale, key_a, key_b = op
            name = key_name(key_a, key_b)
            if comma or name is None:
                return None
            metrics.append((name, number(a, b), 1.0 if scale is None else scale))
        elif type(op) is Put:
            a, b, comma, scale, kind, key_a, key_b, seconds, metric = op
            if comma:
                return None
            scale = 1.0 if scale is None else scale
            if kind == keys.STEP:
                ok = claim("step", (number(a, b), False)) if scale == 1.0 else False
            elif kind == keys.TOTAL:
                ok = claim("total", (number(a, b), False)) if scale == 1.0 else False
            elif kind == keys.LOSS:
                ok = claim("loss", (number(a, b), scale))
            elif kind == keys.TOKENS:
                ok = claim("tokens", (number(a, b), scale))
            elif kind == keys.TIME and seconds is not None:
                ok = claim("seconds", (number(a, b), scale, seconds))
            elif kind == keys.SAMPLES:
                index = number(a, b)
                ok = claim("samples", (index, scale))
                if ok and metric:  # samples/s is a metric as well
                    name = key_name(key_a, key_b)
                    if name is None:
                        return None
                    metrics.append((name, index, scale))
            elif kind in keys.AS_METRIC:
                return None  # printed iteration rates, counts: run's
            else:
                if metric:
                    name = key_name(key_a, key_b)
                    if name is None:
                        return None
                    metrics.append((name, number(a, b), scale))
                ok = True
            if not ok:
                return None
        elif type(op) is Step:
            a, b, total_a, total_b, only_if_unset = op
            if only_if_unset or not claim("step", (number(a, b), True)):
                return None
            if total_a >= 0 and not claim("total", (number(total_a, total_b), True)):
                return None
        elif type(op) is Rate:
            a, b, comma, scale, kind, seconds = op
            if comma:
                return None
            if kind == keys.TOKENS:
                ok = claim("tokens", (number(a, b), scale))
            elif kind == keys.SAMPLES:
                ok = claim("samples", (number(a, b), scale))
            elif kind == keys.TIME:
                ok = claim("seconds", (number(a, b), scale, seconds))
            else:
                return None  # a printed iteration rate: run's
            if not ok:
                return None
        elif type(op) is Tqdm:
            if bar or op.kind != keys.STEPS_RATE:
                return None  # bars of tokens or samples, two bars: run's
            n_a, n_b, total_a, total_b, rate_a, rate_b, rate_scale, _, inverse, el_a, el_b = op
            # run's Tqdm sets step, total (when > 0) and step time whatever
            # came before: one source each, or order decides (run's).
            if n_a >= 0 and not claim("step", (number(n_a, n_b), True)):
                return None
            if total_a >= 0 and not claim("total", (number(total_a, total_b), True)):
                return None
            if rate_a >= 0:
                if not claim("seconds", (-1, 1.0, 1.0)):
                    return None
                bar["rate"] = (number(rate_a, rate_b), rate_scale, inverse)
            parts = line[el_a:el_b].split(":")
            at = el_a
            clock = []
            for part in parts:
                clock.append(number(at, at + len(part)))
                at += len(part) + 1
            bar["elapsed"] = tuple(clock)
        else:
            return None  # alternatives: the general runner
    if not spans or ("tokens" in taken and "samples" in taken):
        return None
    step, step_is_int = slots["step"]
    total, total_is_int = slots["total"]
    tokens, tokens_scale = slots["tokens"]
    loss, loss_scale = slots["loss"]
    seconds, seconds_scale, seconds_unit = slots["seconds"]
    samples, samples_scale = slots["samples"]
    rate, rate_scale, rate_inverse = bar.get("rate", (-1, 1.0, False))
    return FastPlan(
        itemgetter(*spans) if len(spans) > 1 else itemgetter(spans[0], spans[0]),
        step, step_is_int, total, total_is_int, tokens, tokens_scale, loss, loss_scale,
        seconds, seconds_scale, seconds_unit, samples, samples_scale, tuple(metrics),
        rate, rate_scale, rate_inverse, bar.get("elapsed", ()), tuple(map(itemgetter, spans)),
        tuple((span.start, span.stop) for span in spans),
    )


def clock_seconds(parts: tuple[int, ...]) -> float:
    """``numbers.parse_clock`` of a tqdm clock cut into its parts (hours
    first, when shown): the same float of the same whole seconds."""
    if len(parts) == 3:
        return float(parts[0] * 3600 + parts[1] * 60 + parts[2])
    return float(parts[0] * 60 + parts[1])


def run_fast(fast: FastPlan, ops: RunOps, line: str, rank: int | None, rank_at: int) -> Values | None:
    """``run``'s values of ``line`` by ``fast``; ``run`` itself where a value check fails."""
    cut = fast.cut(line)
    step = total = tokens = loss = step_seconds = samples = None
    i = fast.step
    if i >= 0:
        if fast.step_is_int:
            step = int(cut[i])
        else:
            value = float(cut[i])
            if not (math.isfinite(value) and value >= 0 and value == int(value)):
                return run(ops, line, rank, rank_at)
            step = int(value)
    i = fast.total
    if i >= 0:
        if fast.total_is_int:
            total = int(cut[i]) or None
        else:
            value = float(cut[i])
            if not (math.isfinite(value) and value > 0 and value == int(value)):
                return run(ops, line, rank, rank_at)
            total = int(value)
    i = fast.tokens
    if i >= 0:
        tokens = float(cut[i]) * fast.tokens_scale
        if not (tokens >= 0 and tokens != INF):  # NaN fails the first test
            return run(ops, line, rank, rank_at)
    i = fast.loss
    if i >= 0:
        loss = float(cut[i]) * fast.loss_scale
    i = fast.seconds
    if i >= 0:
        step_seconds = float(cut[i]) * fast.seconds_scale * fast.seconds_unit
        if not (step_seconds >= 0 and step_seconds != INF):
            return run(ops, line, rank, rank_at)
    i = fast.samples
    if i >= 0:
        samples = float(cut[i]) * fast.samples_scale
        if not (samples >= 0 and samples != INF):
            return run(ops, line, rank, rank_at)
    steps_rate = elapsed = None
    i = fast.rate
    if i >= 0:  # a tqdm bar's shown rate: run's Tqdm op
        shown = float(cut[i]) * fast.rate_scale
        if not (shown >= 0 and shown != INF):
            return run(ops, line, rank, rank_at)
        turned = 1.0 / shown if shown else None
        if fast.rate_inverse:
            step_seconds, steps_rate = shown, turned
        else:
            step_seconds, steps_rate = turned, shown
    if fast.elapsed:
        elapsed = clock_seconds(tuple([int(cut[j]) for j in fast.elapsed]))
    metrics = tuple([(name, float(cut[j]) * scale) for name, j, scale in fast.metrics])
    if step is None and loss is None and tokens is None and samples is None and steps_rate is None:
        return None
    if rank is None and rank_at >= 0:
        rank = rank_digits(line, rank_at)
    # run's rate_from, inline (a printed iteration rate: a tqdm bar's).
    rate: float | None
    unit: str | None
    if tokens is not None:
        rate, unit = tokens, TOK_S
    elif samples is not None:
        rate, unit = samples, SAMPLES_S
    elif steps_rate is not None:
        rate, unit = steps_rate, IT_S
    elif step_seconds:
        rate, unit = 1.0 / step_seconds, IT_S
    else:
        rate = unit = None
    return step, total, tokens, loss, rank, metrics, step_seconds, rate, unit, elapsed
