"""The general runner: a plan applied to a line, value checks included.

The answer is a line's *values*: the fields of a ``Progress`` after time
and source, but for ``clocked`` (the stream's to say) -- ``(step,
total_steps, tokens_per_s, loss, rank, metrics, step_seconds, rate,
rate_unit, elapsed_s)`` -- or None when the line is no progress.

The rate is the one the run prints, the most telling first: tokens/s,
then samples/s, then an iteration rate printed as such (tqdm's ``it/s``,
``s/it`` turned over, ``train_steps_per_second``), then one worked out
from a step time (``dt``, ``step_avg``, ms per iteration). Where a line
gives tokens and samples (rates, or counts that pair by name) their ratio
is the metric ``tokens_per_sample``, and with samples/s it makes the
tokens/s the line does not print.
"""

from __future__ import annotations

import math

from ..events import IT_S, SAMPLES_S, TOK_S
from ..numbers import finite, parse_clock
from ..ranks import rank_digits
from . import keys
from .ops import METRIC, PUT, RATE, STEP, TQDM, TRY_CODE, RunOps, Values

TOKENS_PER_SAMPLE = "tokens_per_sample"


def rate_from(
    tokens: float | None, samples: float | None, steps_rate: float | None, step_seconds: float | None
) -> tuple[float | None, str | None]:
    """The line's rate and its unit, the most telling first."""
    if tokens is not None:
        return tokens, TOK_S
    if samples is not None:
        return samples, SAMPLES_S
    if steps_rate is not None:
        return steps_rate, IT_S
    if step_seconds:  # 0 s per step is no rate
        return 1.0 / step_seconds, IT_S
    return None, None


def run(ops: RunOps, line: str, rank: int | None, rank_at: int) -> Values | None:
    """Apply a plan (``runnable``) to a line: the value checks, then the values or None.

    ``rank``: the line's rank as its caller split it (the stream), else
    None: read from the prefix whose digits the plan found at ``rank_at``
    (-1: none), for a caller that hands a whole line."""
    step = total = tokens = loss = step_seconds = None
    samples = steps_rate = token_count = sample_count = elapsed = None
    metrics: list[tuple[str, float]] = []
    for op in ops:
        # ``runnable`` ops: the code, then the fields of its class in
        # ``ops`` (Metric, Put, Step, Rate, Tqdm, Try), unpacked.
        code = op[0]
        if code == METRIC:
            _, a, b, comma, scale, key_a, key_b = op
            value = float(line[a:b].replace(",", "") if comma else line[a:b])
            metrics.append((line[key_a:key_b], value if scale is None else value * scale))
        elif code == PUT:
            _, a, b, comma, scale, kind, key_a, key_b, seconds, metric = op
            value = float(line[a:b].replace(",", "") if comma else line[a:b])
            if scale is not None:
                value *= scale
            if kind == keys.STEP:
                if step is None and math.isfinite(value) and value >= 0 and value == int(value):
                    step = int(value)
                continue
            if kind == keys.TOTAL:
                if total is None and math.isfinite(value) and value > 0 and value == int(value):
                    total = int(value)
                continue
            if kind == keys.LOSS and loss is None:
                loss = value
                continue
            if kind == keys.TOKENS:
                if tokens is None:
                    tokens = finite(value)
                    if tokens is not None:
                        continue
            elif kind == keys.TIME and step_seconds is None and seconds is not None:
                step_seconds = finite(value * seconds)
                if step_seconds is not None:
                    continue
            elif kind == keys.SAMPLES:
                if samples is None:
                    samples = finite(value)
            elif kind == keys.STEPS_RATE:
                if steps_rate is None:
                    steps_rate = finite(value)
            elif kind == keys.TOKEN_COUNT:
                if token_count is None:
                    token_count = finite(value)
            elif kind == keys.SAMPLE_COUNT:
                if sample_count is None:
                    sample_count = finite(value)
            if metric:
                metrics.append((line[key_a:key_b], value))
        elif code == STEP:
            _, a, b, total_a, total_b, only_if_unset = op
            if only_if_unset and step is not None:
                continue
            step = int(line[a:b])
            if total_a >= 0:
                n = int(line[total_a:total_b])
                if n > 0:
                    total = n
        elif code == RATE:
            _, a, b, comma, scale, kind, seconds = op
            value = float(line[a:b].replace(",", "") if comma else line[a:b]) * scale
            if kind == keys.TOKENS:
                if tokens is None:
                    tokens = finite(value)
            elif kind == keys.SAMPLES:
                if samples is None:
                    samples = finite(value)
            elif kind == keys.STEPS_RATE:
                if steps_rate is None:
                    steps_rate = finite(value)
            elif step_seconds is None:
                step_seconds = finite(value * seconds)
        elif code == TQDM:
            _, a, b, total_a, total_b, rate_a, rate_b, rate_scale, kind, inverse, el_a, el_b = op
            if a >= 0:
                step = int(line[a:b])
                if total_a >= 0:
                    n = int(line[total_a:total_b])
                    if n > 0:
                        total = n
            elapsed = parse_clock(line[el_a:el_b])
            if rate_a >= 0:
                shown = finite(float(line[rate_a:rate_b]) * rate_scale)
                per_item = shown if inverse else (1.0 / shown if shown else None)
                per_second = (1.0 / shown if shown else None) if inverse else shown
                if kind == keys.STEPS_RATE:
                    step_seconds = per_item
                    steps_rate = per_second
                elif kind == keys.TOKENS:
                    if tokens is None:
                        tokens = per_second
                elif samples is None:
                    samples = per_second
        elif code == TRY_CODE:
            if step is not None or loss is not None or tokens is not None or samples is not None \
                    or steps_rate is not None:
                break
            step = total = tokens = loss = step_seconds = None
            samples = steps_rate = token_count = sample_count = elapsed = None
            metrics = []
    if step is None and loss is None and tokens is None and samples is None and steps_rate is None:
        return None
    per_sample = None
    if tokens is not None and samples:
        per_sample = finite(tokens / samples)
    elif token_count is not None and sample_count:
        per_sample = finite(token_count / sample_count)
        if tokens is None and samples is not None and per_sample is not None:
            tokens = finite(samples * per_sample)
    if per_sample is not None:
        metrics.append((TOKENS_PER_SAMPLE, per_sample))
    if rank is None and rank_at >= 0:
        rank = rank_digits(line, rank_at)
    rate, unit = rate_from(tokens, samples, steps_rate, step_seconds)
    return step, total, tokens, loss, rank, tuple(metrics), step_seconds, rate, unit, elapsed
