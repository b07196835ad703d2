"""Plans: what a line of a given shape says, worked out once.

Reading a progress line is ~40 us of Python; a training log prints the
same few line shapes with new numbers. Every decision of the readers
depends on the text with its digits, never on what the digits are (regexes
use [0-9] and counts, keys never contain a digit that matters), except the
checks on the values themselves (a step must be a whole number, a rate
finite...). So the readers compile a line into a *plan*: the spans to read
and what each one is, as op tuples, keyed on the line with every digit
made 0 (``progress.plans``). A line of a known shape then costs a
dictionary lookup and a few float() calls; the value checks run on every
line (``progress.run``).

Spans are offsets into the line given to the runner. An op is one of six
named tuples; its class says what it is (the runners dispatch on
``type(op) is``), its fields are the operands, unpacked at tuple speed:

- ``Put``: a named value; ``kind`` a ``keys`` kind
- ``Metric``: a value that is only a metric (the commonest op)
- ``Step``: "step 12/500"
- ``Rate``: a value written before its unit ("21.5 Ktok/s", "12
  samples/s", "3.4 it/s", "96 ms/iter"), when no named one came first
- ``Tqdm``: a tqdm bar's count, rate (``kind`` TOKENS, SAMPLES or
  STEPS_RATE; ``inverse`` for ``s/it``) and elapsed counter
- ``Try``: an attempt ends; its result stands if it found anything
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ..numbers import SI, VALUE, floats
from . import keys


class Put(NamedTuple):
    """A named value ``line[a:b]`` (``comma``: it has thousands commas), times
    ``scale``; ``kind`` says which field it fills, ``seconds`` the unit of a
    step time, ``metric`` whether it is a metric as well."""

    a: int
    b: int
    comma: bool
    scale: float | None
    kind: int
    key_a: int
    key_b: int
    seconds: float | None
    metric: bool


class Metric(NamedTuple):
    """A value ``line[a:b]`` that is only a metric, named ``line[key_a:key_b]``."""

    a: int
    b: int
    comma: bool
    scale: float | None
    key_a: int
    key_b: int


class Step(NamedTuple):
    """"step 12/500": the step at ``line[a:b]``, its total at
    ``line[total_a:total_b]`` (-1: none); ``only_if_unset``: no step yet."""

    a: int
    b: int
    total_a: int
    total_b: int
    only_if_unset: bool


class Rate(NamedTuple):
    """A value before its unit, times ``scale``; ``seconds`` for step times."""

    a: int
    b: int
    comma: bool
    scale: float
    kind: int
    seconds: float | None


class Tqdm(NamedTuple):
    """A tqdm bar: count, total and rate spans (-1: none), the rate's SI
    scale and kind, ``inverse`` for ``s/it``, the elapsed counter's span."""

    n_a: int
    n_b: int
    total_a: int
    total_b: int
    rate_a: int
    rate_b: int
    rate_scale: float
    kind: int
    inverse: bool
    elapsed_a: int
    elapsed_b: int


class Try(NamedTuple):
    """An attempt ends: its result stands if it found anything."""


TRY = Try()

Op = Put | Metric | Step | Rate | Tqdm | Try
Ops = tuple[Op, ...]

# The general runner reads a plan on every line of its shape, as exact
# tuples: its op's code, then the op's fields in their order above. CPython
# unpacks an exact tuple twice as fast as a tuple subclass (3.11: 77 vs 154
# ns), which made ``run`` 14% slower (/tmp bench, issue 18); so the plan
# cache holds ``runnable(ops)``, and only ``run`` sees these.
PUT, STEP, RATE, TQDM, TRY_CODE, METRIC = range(6)
_CODES: dict[type, int] = {Put: PUT, Step: STEP, Rate: RATE, Tqdm: TQDM, Try: TRY_CODE, Metric: METRIC}
RunOps = tuple[tuple[Any, ...], ...]


def runnable(ops: Ops) -> RunOps:
    """``ops`` as ``run.run`` reads them: ``(code, *fields)``."""
    return tuple((_CODES[type(op)], *op) for op in ops)


_TYPES: dict[int, type] = {code: kind for kind, code in _CODES.items()}


def yields_run(op: tuple[Any, ...]) -> bool:
    """``yields`` of an op as the plan cache holds it (``runnable``)."""
    found: Op = _TYPES[op[0]](*op[1:])
    return yields(found)
Metrics = tuple[tuple[str, float], ...]
# ``progress_fields``: Progress's fields after time and source, through
# ``step_seconds`` (step, total_steps, tokens_per_s, loss, rank, metrics,
# step_seconds). Plain tuples too: one per progress line, unpacked into a
# Progress at once.
Fields = tuple[int | None, int | None, float | None, float | None, int | None, Metrics, float | None]
# ``progress_values``: the fields, then rate, rate_unit and elapsed_s.
Values = tuple[
    int | None, int | None, float | None, float | None, int | None, Metrics, float | None,
    float | None, str | None, float | None,
]

# "step 12", "iteration 20/ 1000", "Step 5 [5/100]"
STEP_WORD = re.compile(
    r"(?<![a-z_/.\-])(?:[Ss]tep|STEP|[Ii]teration|ITERATION|[Ii]ter)\b[\s:=#]*([0-9]{1,18})(?![0-9.])"
    r"(?:\s*/\s*([0-9]{1,18})(?![0-9])|\s*\[\s*[0-9]{1,18}\s*/\s*([0-9]{1,18})\s*\])?"
)


def span(m: re.Match[str], group: int | str, base: int = 0) -> tuple[int, int]:
    """A group's span moved by ``base``; (-1, -1) when the group did not take part."""
    if m.group(group) is None:
        return -1, -1
    return base + m.start(group), base + m.end(group)


def stripped(text: str, a: int, b: int, chars: str | None = None) -> tuple[int, int]:
    """The span of ``text[a:b].strip(chars)``."""
    part = text[a:b]
    a += len(part) - len(part.lstrip(chars))
    return a, a + len(part.strip(chars))


class Plan:
    """Collects the ops of one line; ``base`` is where ``text`` sits in the line.

    ``summary``: the line is an end-of-run summary (HF's ``train_runtime``
    dict): its rates count, but its ``train_loss`` is the mean of the run,
    not a step's loss, so step, total and loss keys are only metrics there.
    """

    __slots__ = ("ops", "base", "summary")

    def __init__(self, base: int, summary: bool = False) -> None:
        self.ops: list[Op] = []
        self.base = base
        self.summary = summary

    def put(self, text: str, key: tuple[int, int], num: tuple[int, int], scale: float | None, unit: str | None) -> None:
        key_text = text[key[0]:key[1]]
        kind, seconds = keys.classify(key_text, unit)
        if self.summary and kind in (keys.STEP, keys.TOTAL, keys.LOSS):
            kind = keys.OTHER
        metric = key_text != key_text.upper()  # "DP=0", "W0531 18" are not metrics
        if kind == keys.OTHER and not metric:
            return
        base = self.base
        a, b, comma = base + num[0], base + num[1], "," in text[num[0]:num[1]]
        if kind == keys.OTHER:  # the commonest op, and the simplest: its own code
            self.ops.append(Metric(a, b, comma, scale, base + key[0], base + key[1]))
        else:
            self.ops.append(Put(a, b, comma, scale, kind, base + key[0], base + key[1], seconds, metric))

    def value(self, text: str, key: tuple[int, int], value: tuple[int, int], key_pattern: re.Pattern[str]) -> None:
        """``key`` = ``value`` if the key is a name and the value a number."""
        m = VALUE.fullmatch(text[value[0]:value[1]])
        if m is None or key_pattern.match(text[key[0]:key[1]]) is None or not floats(m.group("num")):
            return
        si = m.group("si")
        num = (value[0] + m.start("num"), value[0] + m.end("num"))
        self.put(text, key, num, SI[si] if si else None, m.group("unit"))

    def step(self, text: str, only_if_unset: bool = False) -> None:
        m = STEP_WORD.search(text)
        if m is not None:
            base = self.base
            total = span(m, 2, base) if m.group(2) is not None else span(m, 3, base)
            self.ops.append(Step(base + m.start(1), base + m.end(1), *total, only_if_unset))


def settle_counts(ops: list[Op], line: str) -> list[Op]:
    """Token and sample counts whose names pair up (``consumed_tokens`` with
    ``consumed_samples``) stay counts; every other count is only a metric."""
    kinds = (keys.TOKEN_COUNT, keys.SAMPLE_COUNT)
    counts = {
        id(op): (op, keys.count_family(line[op.key_a:op.key_b]))
        for op in ops if type(op) is Put and op.kind in kinds
    }
    if not counts:
        return ops
    samples = {family for op, family in counts.values() if op.kind == keys.SAMPLE_COUNT}
    family = next(
        (family for op, family in counts.values() if op.kind == keys.TOKEN_COUNT and family in samples), None
    )
    out: list[Op] = []
    for op in ops:
        count = counts.get(id(op))
        if count is not None and count[1] != family:
            put = count[0]
            if put.metric:
                out.append(Metric(put.a, put.b, put.comma, put.scale, put.key_a, put.key_b))
            continue
        out.append(op)
    return out


def yields(op: Op) -> bool:
    """Whether an op can make a line progress: ``run`` returns None for a
    line whose ops fill none of step, loss, tokens/s or a printed rate of
    samples or steps (a line of metrics or of step times only)."""
    if type(op) is Put:
        return op.kind in (keys.STEP, keys.LOSS, keys.TOKENS, keys.SAMPLES, keys.STEPS_RATE)
    if type(op) is Rate:
        return op.kind in (keys.TOKENS, keys.SAMPLES, keys.STEPS_RATE)
    return type(op) is Step or type(op) is Tqdm
