"""Progress lines of training loops, whatever framework printed them.

The throughput and stall detectors need step, tokens/s, loss and the step
interval, and every framework prints them differently: ``key: value`` fields
split by ``|`` (nanochat, nanotron, Megatron, DFlash), by spaces (torchtitan,
modded-nanogpt), Python dict reprs (HF Trainer), tqdm bars, JSON lines. One
generic reader of "name, separator, number, unit" covers most of them, and
a table of key names maps them onto the fields; dicts and tqdm bars have
their own small readers because their grammar is different.

Numbers come with comma thousands (``1,092,168``), SI suffixes (``22.8K``)
and time units (``480.04ms``). Per-GPU rates (``tokens_per_sec_per_gpu``)
are kept as metrics, never as ``tokens_per_s``. torchtitan's ``tps`` is
taken as tokens/s as printed; the throughput detector compares a run with
its own baseline, so a consistent per-device figure serves as well.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter

from parsers.events import Progress
from parsers.ranks import split_rank

# Cheap substrings: a line without any of them is not a progress line. The
# stream scanner searches the whole chunk for these before any per-line work.
# (tqdm bars always show a rate, ``it/s`` or ``s/it``, even ``?it/s``.)
CANDIDATES: tuple[str, ...] = ("tep", "teration", "loss", "Loss", "tok", "it/s", "s/it")

_NUM = (
    r"[-+]?(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|NaN|inf|Inf)"
)
# A whole value token: number, SI suffix, time unit. Anchored (fullmatch),
# so it costs one attempt, not one per position of the line.
_VALUE = re.compile(rf"(?P<num>{_NUM})(?P<si>[kKMGT])?(?P<unit>ms|min|s|m|h|%)?")
# Keys are words; `|`-separated fields may have several ("lm loss",
# "elapsed time per iteration (ms)") but no word starting with a digit.
_KEY = re.compile(r"[A-Za-z_][\w()./@%\-]*\Z")
_FIELD_KEY = re.compile(r"[A-Za-z_][\w()./@%\-]*(?:\s+[A-Za-z(][\w()./@%\-]*)*\Z")
_STEP = re.compile(
    r"(?<![a-z_/.\-])(?:[Ss]tep|STEP|[Ii]teration|ITERATION|[Ii]ter)\b[\s:=#]*([0-9]{1,18})(?![0-9.])"
    r"(?:\s*/\s*([0-9]{1,18})(?![0-9])|\s*\[\s*[0-9]{1,18}\s*/\s*([0-9]{1,18})\s*\])?"
)
# Throughput written unit-last ("21.5 Ktok/s"): find the unit, then read the
# number before it. Per-GPU figures are refused.
_TOK_UNIT = re.compile(
    r"tok(?:en)?s?\s*/\s*(?:sec|s)(?![\w/])(?!\s*(?i:per\s*)?(?i:gpu|device|rank|dev)\b)"
)
_TQDM_RATE = re.compile(
    r"\[(?P<elapsed>[0-9:]+)(?:<[0-9:?]+)?,\s*(?P<rate>[0-9]+(?:\.[0-9]+)?|\?)\s*(?P<unit>it/s|s/it)"
    r"(?P<post>[^\]]*)\]"
)
_TQDM_COUNT = re.compile(r"([0-9]{1,18})(?:/([0-9]{1,18}))?(?:it)?\Z")
_PAIR = re.compile(
    r"""['"](?P<key>[^'"\\]{1,64})['"]\s*:\s*(?:'(?P<sq>[^']{0,64})'|"(?P<dq>[^"]{0,64})"|(?P<raw>[^,{}\[\]\s'"][^,}\]\s]{0,63}))"""
)
_STRIP = " \t,;]})"

_SI = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_SECONDS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}

_STEP_KEYS = frozenset({"step", "global_step", "iteration", "iter", "train/step", "train/global_step"})
_TOTAL_KEYS = frozenset({"total_steps", "max_steps", "num_steps", "total_iterations", "train_iters"})
_LOSS_KEYS = frozenset({
    "loss", "lm_loss", "train_loss", "train/loss", "training_loss", "loss/train", "train_lm_loss",
})
_TOKENS_KEYS = frozenset({
    "tok/s", "tok/sec", "toks/s", "tokens/s", "tokens/sec", "tokens/second", "tok_per_s",
    "tok_per_sec", "tokens_per_s", "tokens_per_sec", "tokens_per_second", "train_tokens_per_second",
    "train/tokens_per_s", "train/tokens_per_second", "throughput/tokens_per_s", "tps", "wps",
})
_STEP_TIME_KEYS = frozenset({
    "dt", "step_avg", "step_time", "time_per_step", "iter_time", "time_per_iteration",
    "elapsed_time_per_iteration", "step_seconds", "s/step", "sec/step", "s/it", "train/step_time",
})
# tqdm bars that are not the training loop (loading, preprocessing, evaluation).
_NOT_TRAINING = re.compile(
    r"(?i)load|download|fetch|map|filter|token|generat|evaluat|valid|extract|convert|process|shard|"
    r"upload|saving|compil|warm|prefill|sampl|preprocess"
)
_SUMMARY_KEYS = ("train_runtime", "eval_runtime", "predict_runtime")


def parse_number(text: str) -> float | None:
    """``'1,092,168'`` -> 1092168.0, ``'22.8K'`` -> 22800.0; None if not a number."""
    text = text.strip()
    scale = 1.0
    if text[-1:] in _SI and text[:-1]:
        scale = _SI[text[-1]]
        text = text[:-1].rstrip()
    try:
        return float(text.replace(",", "")) * scale
    except ValueError:
        return None


def _finite(value: float | None) -> float | None:
    """Rates and intervals must be real non-negative numbers to be any use."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value


_NORMS: dict[str, tuple[str, str | None]] = {}


def _norm(key: str) -> tuple[str, str | None]:
    """Lower-case, ``_`` for spaces; a ``(ms)``/``_ms`` suffix becomes the unit.

    Memoised: a log repeats the same few keys on every line.
    """
    found = _NORMS.get(key)
    if found is not None:
        return found
    k = "_".join(key.lower().split())
    found = (k, None)
    for suffix, unit in (("_(ms)", "ms"), ("(ms)", "ms"), ("_ms", "ms"), ("_(s)", "s"), ("(s)", "s")):
        if k.endswith(suffix) and len(k) > len(suffix):
            found = (k[: -len(suffix)], unit)
            break
    if len(_NORMS) > 4096:
        _NORMS.clear()
    _NORMS[key] = found
    return found


# -- plans: what a line of a given shape says, worked out once ---------------
#
# Reading a progress line is ~40 us of Python; a training log prints the
# same few line shapes with new numbers. Every decision of the readers below
# depends on the text with its digits, never on what the digits are (regexes
# use [0-9] and counts, keys never contain a digit that matters), except the
# checks on the values themselves (a step must be a whole number, a rate
# finite...). So the readers compile a line into a *plan*: the spans to read
# and what each one is, keyed on the line with every digit made 0. A line of
# a known shape then costs a dictionary lookup and a few float() calls; the
# value checks run on every line, in ``_run``.

# Op codes. Spans are offsets into the line given to ``progress_fields``.
_OP_PUT = 0   # (_OP_PUT, a, b, comma, scale, kind, key_a, key_b, seconds, metric): a named value
_OP_STEP = 1  # (_OP_STEP, a, b, total_a, total_b, only_if_unset): "step 12/500"
_OP_RATE = 2  # (_OP_RATE, a, b, comma, scale): "21.5 Ktok/s", when no named tokens/s came first
_OP_TQDM = 3  # (_OP_TQDM, a, b, total_a, total_b, rate_a, rate_b, per_it): a tqdm bar's count and rate
_OP_TRY = 4   # (_OP_TRY,): an attempt ends; its result stands if it found anything
_OP_METRIC = 5  # (_OP_METRIC, a, b, comma, scale, key_a, key_b): a value that is only a metric

# What a named value is (``_classify``). The key sets are disjoint, so one
# kind per key loses nothing.
_K_STEP, _K_TOTAL, _K_LOSS, _K_TOKENS, _K_TIME, _K_OTHER = range(6)

# Shape key: the line's UTF-8 bytes with ASCII digits 1-9 made 0 (bytes are
# translated in C, ~10x faster than str.translate). UTF-8 never uses 0x30-0x39
# inside a multi-byte character, so equal keys mean equal text but for digits.
_SHAPE = bytes.maketrans(b"123456789", b"000000000")
_PLANS: dict[bytes, tuple] = {}  # shape -> (rank_at, ops, fast plan or None)
_PLANS_MAX = 512
_PLAN_LINE_MAX = 2048  # longer lines are planned every time (bounded memory)
_NO_PLAN: tuple[int, tuple] = (-1, ())

_WORD = re.compile(r"\S+")  # str.split()'s words, with their offsets


def _classify(key: str, unit: str | None) -> tuple[int, float | None]:
    """The field a key names, and (step times) the seconds of its unit."""
    norm, key_unit = _norm(key)
    if norm in _STEP_KEYS:
        return _K_STEP, None
    if norm in _TOTAL_KEYS:
        return _K_TOTAL, None
    if norm in _LOSS_KEYS:
        return _K_LOSS, None
    if norm in _TOKENS_KEYS:
        return _K_TOKENS, None
    if norm in _STEP_TIME_KEYS:
        return _K_TIME, _SECONDS.get(unit or key_unit or "s")
    return _K_OTHER, None


def _span(m: re.Match[str], group: int | str, base: int = 0) -> tuple[int, int]:
    """A group's span moved by ``base``; (-1, -1) when the group did not take part."""
    if m.group(group) is None:
        return -1, -1
    return base + m.start(group), base + m.end(group)


def _stripped(text: str, a: int, b: int, chars: str | None = None) -> tuple[int, int]:
    """The span of ``text[a:b].strip(chars)``."""
    part = text[a:b]
    a += len(part) - len(part.lstrip(chars))
    return a, a + len(part.strip(chars))


def _floats(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


class _Plan:
    """Collects the ops of one line; ``base`` is where ``text`` sits in the line."""

    __slots__ = ("ops", "base")

    def __init__(self, base: int) -> None:
        self.ops: list[tuple] = []
        self.base = base

    def put(self, text: str, key: tuple[int, int], num: tuple[int, int], scale: float | None, unit: str | None) -> None:
        key_text = text[key[0]:key[1]]
        kind, seconds = _classify(key_text, unit)
        metric = key_text != key_text.upper()  # "DP=0", "W0531 18" are not metrics
        if kind == _K_OTHER and not metric:
            return
        base = self.base
        a, b, comma = base + num[0], base + num[1], "," in text[num[0]:num[1]]
        if kind == _K_OTHER:  # the commonest op, and the simplest: its own code
            self.ops.append((_OP_METRIC, a, b, comma, scale, base + key[0], base + key[1]))
        else:
            self.ops.append((_OP_PUT, a, b, comma, scale, kind, base + key[0], base + key[1], seconds, metric))

    def value(self, text: str, key: tuple[int, int], value: tuple[int, int], key_pattern: re.Pattern[str]) -> None:
        """``key`` = ``value`` if the key is a name and the value a number."""
        m = _VALUE.fullmatch(text[value[0]:value[1]])
        if m is None or key_pattern.match(text[key[0]:key[1]]) is None or not _floats(m.group("num")):
            return
        si = m.group("si")
        num = (value[0] + m.start("num"), value[0] + m.end("num"))
        self.put(text, key, num, _SI[si] if si else None, m.group("unit"))

    def step(self, text: str, only_if_unset: bool = False) -> None:
        m = _STEP.search(text)
        if m is not None:
            base = self.base
            total = _span(m, 2, base) if m.group(2) is not None else _span(m, 3, base)
            self.ops.append((_OP_STEP, base + m.start(1), base + m.end(1), *total, only_if_unset))


def _plan_fields(plan: _Plan, text: str) -> None:
    """``key: value`` fields between ``|`` (nanochat, nanotron, Megatron)."""
    start = 0
    for part in text.split("|"):
        colon = part.find(":")
        equal = part.find("=")
        sep = colon if equal < 0 or 0 <= colon < equal else equal
        if sep > 0:
            key = _stripped(text, start, start + sep)
            value = _stripped(text, start + sep + 1, start + len(part), _STRIP)
        else:  # "loss 2.31": the last word is the value
            a, b = _stripped(text, start, start + len(part))
            space = text.rfind(" ", a, b)
            key = (a, a + len(text[a:space].rstrip())) if space >= 0 else (a, a)
            value = (space + 1, b)
        if key[1] > key[0] and value[1] > value[0]:
            plan.value(text, key, value, _FIELD_KEY)
        start += len(part) + 1


def _plan_tokens(plan: _Plan, text: str) -> None:
    """``key:value``, ``key: value``, ``key=value`` and ``key value`` words."""
    words = [m.span() for m in _WORD.finditer(text)]
    count = len(words)
    i = 0
    while i < count:
        a, b = words[i]
        word = text[a:b]
        i += 1
        colon = word.find(":")
        equal = word.find("=")
        sep = colon if equal < 0 or 0 <= colon < equal else equal
        if sep == 0:
            continue
        if sep > 0:
            key = (a, a + sep)
            value = (a + sep + 1, b)
            if value[1] == value[0]:
                if i == count:
                    break
                value = words[i]
                i += 1
        else:
            if i == count or word[0] not in _KEY_START:
                continue
            key = (a, b)
            value = words[i]  # the next word stays in play as a key
        if text[key[0]] in _KEY_START:
            plan.value(text, key, _stripped(text, value[0], value[1], _STRIP), _KEY)


_KEY_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


def _plan_rate(plan: _Plan, text: str) -> None:
    """Throughput written as value then unit: ``21.5 Ktok/s``."""
    for m in _TOK_UNIT.finditer(text):
        lo = max(0, m.start() - 40)
        words = [(lo + w.start(), lo + w.end()) for w in _WORD.finditer(text[lo:m.start()])]
        if not words:
            continue
        scale = 1.0
        a, b = words[-1]
        last = text[a:b]
        if last in _SI:  # "21.5 Ktok/s"
            scale = _SI[last]
            if len(words) < 2:
                continue
            a, b = words[-2]
            last = text[a:b]
        elif last[-1:] in _SI:  # "21.5Ktok/s"
            scale = _SI[last[-1]]
            last = last[:-1]
        number = _VALUE.fullmatch(last)
        if number is None or number.group("si") or number.group("unit") or not _floats(number.group("num")):
            continue
        num = text[a + number.start("num"):a + number.end("num")]
        plan.ops.append((_OP_RATE, plan.base + a + number.start("num"), plan.base + a + number.end("num"),
                         "," in num, scale))
        return


def _number_span(text: str, a: int, b: int) -> tuple[int, int, float] | None:
    """Where ``parse_number(text[a:b])`` reads its number, and its scale."""
    a, b = _stripped(text, a, b)
    scale = 1.0
    if text[b - 1:b] in _SI and b - 1 > a:
        scale = _SI[text[b - 1]]
        b = a + len(text[a:b - 1].rstrip())
    return (a, b, scale) if _floats(text[a:b]) else None


def _plan_dict(plan: _Plan, text: str, brace: int) -> bool:
    """HF Trainer dict reprs and JSON lines; False when the line says nothing
    whatever its numbers (no numbers, or a ``*_runtime`` summary)."""
    found = []
    for m in _PAIR.finditer(text, brace):
        if m.group("key") in _SUMMARY_KEYS:
            return False
        group = "raw" if m.group("raw") is not None else "sq" if m.group("sq") is not None else "dq"
        number = _number_span(text, *m.span(group))
        if number is not None:
            found.append((m.span("key"), number))
    if not found:
        return False
    for key, (a, b, scale) in found:
        plan.put(text, key, (a, b), None if scale == 1.0 else scale, None)
    if brace > 0:
        plan.step(text[:brace], only_if_unset=True)  # SpecForge: "step 120: {...}"
    return True


def _plan_tqdm(plan: _Plan, text: str) -> bool | None:
    """A tqdm bar; False when the line is no bar at all (try the generic
    reader), None when it is a bar but not the training loop's."""
    unit = text.find("it/s")
    if unit < 0:
        unit = text.find("s/it")
    bracket = text.rfind("[", 0, unit)
    if bracket < 0:
        return False
    m = _TQDM_RATE.match(text, bracket)
    if m is None:
        return False
    before = text[:bracket].rstrip()
    cut = max(before.rfind(" "), before.rfind("|"))
    count = _TQDM_COUNT.match(before, cut + 1)
    if count is None:
        return False
    desc = before[:cut + 1]
    percent = desc.rfind("%|")
    if percent >= 0:
        desc = desc[:percent].rstrip("0123456789 ")
    if _NOT_TRAINING.search(desc):
        return None
    base = plan.base
    rate = (-1, -1) if m.group("rate") == "?" else _span(m, "rate", base)
    plan.ops.append((
        _OP_TQDM, *_span(count, 1, base), *_span(count, 2, base), *rate, m.group("unit") == "s/it",
    ))
    post = m.group("post")
    if post:
        inner = _Plan(base + m.start("post"))
        _plan_tokens(inner, post.replace(",", " "))
        plan.ops.extend(inner.ops)
    return True


def _plan(line: str) -> tuple[int, tuple]:
    """(where a rank prefix starts or -1, ops) for every line of this shape."""
    text = line.strip()
    if not text:
        return _NO_PLAN
    base = len(line) - len(line.lstrip())
    rank_at = -1
    if text[0] == "[":
        rank, rest = split_rank(text)
        if rank is not None:
            rank_at = base
        base += len(text) - len(rest)
        text = rest
    plan = _Plan(base)
    brace = text.find("{")
    if brace >= 0 and ("'" in text or '"' in text):
        if _plan_dict(plan, text, brace):
            if "_runtime" in text:
                return rank_at, tuple(plan.ops)
            plan.ops.append((_OP_TRY,))
        elif "_runtime" in text:
            return _NO_PLAN
    if "it/s" in text or "s/it" in text:
        bar = _plan_tqdm(plan, text)
        if bar is not False:  # None: no more ops, so the dict's result or None
            return rank_at, tuple(plan.ops)
    plan.step(text)
    if text.count("|") >= 2:
        _plan_fields(plan, text)
    else:
        _plan_tokens(plan, text)
    if "tok" in text:
        _plan_rate(plan, text)
    return rank_at, tuple(plan.ops)


def _run(ops: tuple, line: str, rank: int | None, rank_at: int) -> tuple | None:
    """Apply a plan to a line: the value checks, then the fields or None."""
    step = total = tokens = loss = step_seconds = None
    metrics: list[tuple[str, float]] = []
    for op in ops:
        code = op[0]
        if code == _OP_METRIC:
            _, a, b, comma, scale, key_a, key_b = op
            value = float(line[a:b].replace(",", "") if comma else line[a:b])
            metrics.append((line[key_a:key_b], value if scale is None else value * scale))
        elif code == _OP_PUT:
            _, a, b, comma, scale, kind, key_a, key_b, seconds, metric = op
            value = float(line[a:b].replace(",", "") if comma else line[a:b])
            if scale is not None:
                value *= scale
            if kind == _K_STEP:
                if step is None and math.isfinite(value) and value >= 0 and value == int(value):
                    step = int(value)
                continue
            if kind == _K_TOTAL:
                if total is None and math.isfinite(value) and value > 0 and value == int(value):
                    total = int(value)
                continue
            if kind == _K_LOSS and loss is None:
                loss = value
                continue
            if kind == _K_TOKENS:
                if tokens is None:
                    tokens = _finite(value)
                    if tokens is not None:
                        continue
            elif kind == _K_TIME and step_seconds is None and seconds is not None:
                step_seconds = _finite(value * seconds)
                if step_seconds is not None:
                    continue
            if metric:
                metrics.append((line[key_a:key_b], value))
        elif code == _OP_STEP:
            _, a, b, total_a, total_b, only_if_unset = op
            if only_if_unset and step is not None:
                continue
            step = int(line[a:b])
            if total_a >= 0:
                n = int(line[total_a:total_b])
                if n > 0:
                    total = n
        elif code == _OP_RATE:
            if tokens is None:
                _, a, b, comma, scale = op
                tokens = _finite(float(line[a:b].replace(",", "") if comma else line[a:b]) * scale)
        elif code == _OP_TQDM:
            _, a, b, total_a, total_b, rate_a, rate_b, per_it = op
            step = int(line[a:b])
            if total_a >= 0:
                n = int(line[total_a:total_b])
                if n > 0:
                    total = n
            if rate_a >= 0:
                value = float(line[rate_a:rate_b])
                if per_it:
                    step_seconds = _finite(value)
                elif value > 0:
                    step_seconds = _finite(1.0 / value)
        elif code == _OP_TRY:
            if step is not None or loss is not None or tokens is not None:
                break
            step = total = tokens = loss = step_seconds = None
            metrics = []
    if step is None and loss is None and tokens is None:
        return None
    if rank is None and rank_at >= 0:
        rank = split_rank(line[rank_at:])[0]
    return step, total, tokens, loss, rank, tuple(metrics), step_seconds


# -- fast plans: the common plan, run without the op loop ---------------------
#
# Most plans are a handful of plain numbers (no comma groups, no tqdm, no
# alternatives) with at most one source per field. Same shape, same offsets:
# one ``itemgetter`` of slices cuts every number out of the line in C, and
# the fields are picked by index. Only the value checks stay in Python; when
# one fails (a step that is not whole, a rate that is not finite) the
# general ``_run`` decides, so the result is always ``_run``'s.

_INF = math.inf


@dataclass(frozen=True, slots=True)
class _FastPlan:
    cut: object  # itemgetter of slices, or None when there are no numbers
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
    seconds_unit: float  # applied after the scale, in _run's order (floats round)
    metrics: tuple[tuple[str, int, float], ...]  # (name, index, scale)


def _fast_plan(ops: tuple, line: str, shape: bytes) -> _FastPlan | None:
    """The fast form of ``ops``, or None where only ``_run`` is exact."""
    if not line.isascii():
        return None  # shape offsets are bytes: equal to str offsets only in ASCII
    spans: list[slice] = []
    slots = {"step": (-1, False), "total": (-1, False), "tokens": (-1, 1.0), "loss": (-1, 1.0), "seconds": (-1, 1.0, 1.0)}
    taken: set[str] = set()
    metrics: list[tuple[str, int, float]] = []

    def number(a: int, b: int) -> int:
        spans.append(slice(a, b))
        return len(spans) - 1

    def claim(name: str, value: tuple) -> bool:
        if name in taken:
            return False  # two sources for one field: order decides, leave it to _run
        taken.add(name)
        slots[name] = value
        return True

    def key_name(key_a: int, key_b: int) -> str | None:
        # A key with a digit (shaped to 0) may differ between lines of a shape.
        return None if b"0" in shape[key_a:key_b] else line[key_a:key_b]

    for op in ops:
        code = op[0]
        if code == _OP_METRIC:
            _, a, b, comma, scale, key_a, key_b = op
            name = key_name(key_a, key_b)
            if comma or name is None:
                return None
            metrics.append((name, number(a, b), 1.0 if scale is None else scale))
        elif code == _OP_PUT:
            _, a, b, comma, scale, kind, key_a, key_b, seconds, metric = op
            if comma:
                return None
            scale = 1.0 if scale is None else scale
            if kind == _K_STEP:
                ok = claim("step", (number(a, b), False)) if scale == 1.0 else False
            elif kind == _K_TOTAL:
                ok = claim("total", (number(a, b), False)) if scale == 1.0 else False
            elif kind == _K_LOSS:
                ok = claim("loss", (number(a, b), scale))
            elif kind == _K_TOKENS:
                ok = claim("tokens", (number(a, b), scale))
            elif kind == _K_TIME and seconds is not None:
                ok = claim("seconds", (number(a, b), scale, seconds))
            else:
                if metric:
                    name = key_name(key_a, key_b)
                    if name is None:
                        return None
                    metrics.append((name, number(a, b), scale))
                ok = True
            if not ok:
                return None
        elif code == _OP_STEP:
            _, a, b, total_a, total_b, only_if_unset = op
            if only_if_unset or not claim("step", (number(a, b), True)):
                return None
            if total_a >= 0 and not claim("total", (number(total_a, total_b), True)):
                return None
        elif code == _OP_RATE:
            _, a, b, comma, scale = op
            if comma or not claim("tokens", (number(a, b), scale)):
                return None
        else:
            return None  # tqdm bars and alternatives: the general runner
    if not spans:
        return None
    return _FastPlan(
        itemgetter(*spans) if len(spans) > 1 else itemgetter(spans[0], spans[0]),
        *slots["step"], *slots["total"], *slots["tokens"], *slots["loss"], *slots["seconds"], tuple(metrics),
    )


def _run_fast(fast: _FastPlan, ops: tuple, line: str, rank: int | None, rank_at: int) -> tuple | None:
    cut = fast.cut(line)
    step = total = tokens = loss = step_seconds = None
    i = fast.step
    if i >= 0:
        if fast.step_is_int:
            step = int(cut[i])
        else:
            value = float(cut[i])
            if not (math.isfinite(value) and value >= 0 and value == int(value)):
                return _run(ops, line, rank, rank_at)
            step = int(value)
    i = fast.total
    if i >= 0:
        if fast.total_is_int:
            total = int(cut[i]) or None
        else:
            value = float(cut[i])
            if not (math.isfinite(value) and value > 0 and value == int(value)):
                return _run(ops, line, rank, rank_at)
            total = int(value)
    i = fast.tokens
    if i >= 0:
        tokens = float(cut[i]) * fast.tokens_scale
        if not (tokens >= 0 and tokens != _INF):  # NaN fails the first test
            return _run(ops, line, rank, rank_at)
    i = fast.loss
    if i >= 0:
        loss = float(cut[i]) * fast.loss_scale
    i = fast.seconds
    if i >= 0:
        step_seconds = float(cut[i]) * fast.seconds_scale * fast.seconds_unit
        if not (step_seconds >= 0 and step_seconds != _INF):
            return _run(ops, line, rank, rank_at)
    metrics = tuple([(name, float(cut[j]) * scale) for name, j, scale in fast.metrics])
    if step is None and loss is None and tokens is None:
        return None
    if rank is None and rank_at >= 0:
        rank = split_rank(line[rank_at:])[0]
    return step, total, tokens, loss, rank, metrics, step_seconds


# -- columns: many lines of one shape at once -----------------------------------
#
# A training log prints the same progress line thousands of times; the
# stream hands a run of lines of one shape here and gets columns back, each
# number converted by ``map`` in C instead of a Python call per line. Same
# values as ``_run_fast`` line by line; where any line would leave the fast
# path (a value check fails), the answer is None and the stream reads those
# lines one at a time.


def column_plan(line: str, shape: bytes) -> _FastPlan | None:
    """The fast plan of ``line``'s shape when its lines can be read as
    columns: built-in formats, no rank prefix inside, and a step, loss or
    tokens/s on every line (so no line of the shape reads as None)."""
    if len(line) > _PLAN_LINE_MAX:
        return None
    rank_at, ops, fast = _plan_of(line, shape)
    if not ops or fast is None or rank_at >= 0:
        return None
    if fast.step < 0 and fast.loss < 0 and fast.tokens < 0:
        return None
    return fast


def _whole(value: float) -> bool:
    return math.isfinite(value) and value >= 0 and value == int(value)


def _whole_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0 and value == int(value)


def _rate_ok(value: float) -> bool:
    return value >= 0 and value != _INF  # NaN fails the first test


def _scaled(column: tuple[str, ...], scale: float) -> list[float]:
    values = list(map(float, column))
    # x * 1.0 is x for every float (NaN, -0.0 and inf included).
    return values if scale == 1.0 else [v * scale for v in values]


def _counts(column: tuple[str, ...], digits_only: bool, ok: Callable[[float], bool]) -> list[int] | None:
    """Steps or totals: int() of plain digits; else whole floats that pass
    ``ok``, or None when one does not."""
    if digits_only:
        return list(map(int, column))
    values = list(map(float, column))
    return list(map(int, values)) if all(map(ok, values)) else None


def progress_columns(fast: _FastPlan, lines: list[str]) -> tuple | None:
    """``(steps, totals, tokens_per_s, losses, metrics, step_seconds)`` of
    ``lines``, all of one shape whose ``column_plan`` is ``fast``: each a
    list with one entry per line, or ``repeat(None)`` where the shape has
    no such field. None where ``_run_fast`` would fall back on any line."""
    cols = list(zip(*map(fast.cut, lines)))
    none = repeat(None)
    steps: Iterable = none
    totals: Iterable = none
    tokens: Iterable = none
    losses: Iterable = none
    seconds: Iterable = none
    metrics: Iterable = repeat(())
    i = fast.step
    if i >= 0:
        steps = _counts(cols[i], fast.step_is_int, _whole)
        if steps is None:
            return None
    i = fast.total
    if i >= 0:
        totals = _counts(cols[i], fast.total_is_int, _whole_positive)
        if totals is None:
            return None
        if fast.total_is_int:
            totals = [v or None for v in totals]  # "step 3/0": no total
    i = fast.tokens
    if i >= 0:
        tokens = _scaled(cols[i], fast.tokens_scale)
        if not all(map(_rate_ok, tokens)):
            return None
    i = fast.loss
    if i >= 0:
        losses = _scaled(cols[i], fast.loss_scale)
    i = fast.seconds
    if i >= 0:
        scale, unit = fast.seconds_scale, fast.seconds_unit
        seconds = [float(x) * scale * unit for x in cols[i]]  # _run_fast's order
        if not all(map(_rate_ok, seconds)):
            return None
    if fast.metrics:
        pairs = [list(zip(repeat(name), _scaled(cols[j], scale))) for name, j, scale in fast.metrics]
        metrics = list(zip(*pairs))
    return steps, totals, tokens, losses, metrics, seconds


def progress_possible(line: str) -> bool:
    """False when no line of this one's shape can be progress (built-in
    formats): every part the stream would read has an empty plan, whatever
    its digits. Lets the stream skip such shapes (evaluation bars redrawn
    six times a line) after one look."""
    if line[:1] == "[":
        line = split_rank(line)[1]
    parts = [part for part in line.split("\r") if part.strip()] if "\r" in line else [line]
    for part in parts:
        if len(part) > _PLAN_LINE_MAX:
            return True
        if any(_yields(op) for op in _plan_of(part, line_shape(part))[1]):
            return True
    return False


def _yields(op: tuple) -> bool:
    """Whether an op can fill step, loss or tokens/s: ``_run`` returns None
    for a line whose ops fill none of them (a line of metrics only)."""
    code = op[0]
    if code == _OP_PUT:
        return op[5] in (_K_STEP, _K_LOSS, _K_TOKENS)
    return code in (_OP_STEP, _OP_RATE, _OP_TQDM)


def _planned(line: str, shape: bytes) -> tuple[int, tuple, _FastPlan | None]:
    rank_at, ops = _plan(line)
    return rank_at, ops, (_fast_plan(ops, line, shape) if ops else None)


def _plan_of(line: str, shape: bytes) -> tuple[int, tuple, _FastPlan | None]:
    """The cached plan of ``line``'s shape, planned on first sight."""
    plan = _PLANS.get(shape)
    if plan is None:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        plan = _PLANS[shape] = _planned(line, shape)
    return plan


def line_shape(line: str) -> bytes:
    """The key of a line's plan: its UTF-8 with ASCII digits 1-9 made 0.

    The stream keys its own per-shape facts on it too, and hands it back to
    ``progress_fields`` so that a line is encoded once.
    """
    # surrogatepass: decoded logs may hold lone surrogates; any str encodes.
    return line.encode("utf-8", "surrogatepass").translate(_SHAPE)


def progress_fields(
    line: str, rank: int | None = None, pattern: ProgressPattern | None = None, shape: bytes | None = None
) -> tuple | None:
    """``parse_progress`` without the time and source: the fields of a
    Progress after them, ``(step, total_steps, tokens_per_s, loss, rank,
    metrics, step_seconds)``, or None. The stream builds the Progress once
    it knows the line's time. ``shape``, if given, must be
    ``line_shape(line)``."""
    if pattern is not None:
        text = line.strip()
        if not text:
            return None
        if text[0] == "[":
            prefix_rank, text = split_rank(text)
            if rank is None:
                rank = prefix_rank
        return pattern.fields(text, rank)
    if len(line) > _PLAN_LINE_MAX:
        rank_at, ops = _plan(line)
        fast = None
    else:
        rank_at, ops, fast = _plan_of(line, line_shape(line) if shape is None else shape)
    if not ops:
        return None
    if fast is not None:
        return _run_fast(fast, ops, line, rank, rank_at)
    return _run(ops, line, rank, rank_at)


def parse_progress(
    line: str, time: float, source: str, rank: int | None = None,
    pattern: ProgressPattern | None = None,
) -> Progress | None:
    """The progress a line reports, or None. Never raises on any text.

    ``pattern`` (from the config) replaces the built-in formats entirely, so
    that a user who names their format gets exactly that and nothing else.
    """
    found = progress_fields(line, rank, pattern)
    return None if found is None else Progress(time, source, *found)


@dataclass(frozen=True, slots=True)
class ProgressPattern:
    """A user's own progress format: a regex with named groups.

    Groups ``step``, ``total``, ``tokens_per_s``, ``loss`` and
    ``step_seconds`` fill the fields of the same name; numbers may carry
    commas and SI suffixes. ``literals`` are substrings every matching line
    contains; given, they let the stream skip other lines without running the
    regex (without them every line is tried, which is slower).
    """

    pattern: str
    literals: tuple[str, ...] = ()
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    _GROUPS = ("step", "total", "tokens_per_s", "loss", "step_seconds")

    def __post_init__(self) -> None:
        try:
            compiled = re.compile(self.pattern)
        except (re.error, TypeError, ValueError) as exc:
            raise ValueError(f"progress pattern {self.pattern!r} is not a valid regex: {exc}") from None
        if not set(compiled.groupindex) & set(self._GROUPS):
            raise ValueError(
                f"progress pattern {self.pattern!r} names none of the groups {', '.join(self._GROUPS)}"
            )
        object.__setattr__(self, "literals", tuple(self.literals))
        object.__setattr__(self, "regex", compiled)

    def parse(self, line: str, time: float, source: str, rank: int | None = None) -> Progress | None:
        found = self.fields(line, rank)
        return None if found is None else Progress(time, source, *found)

    def fields(self, line: str, rank: int | None = None) -> tuple | None:
        """What ``parse`` reads, as ``progress_fields`` returns it."""
        m = self.regex.search(line)
        if m is None:
            return None
        groups = m.groupdict()
        values: dict[str, float] = {}
        for name in self._GROUPS:
            text = groups.get(name)
            if text:
                value = parse_number(text)
                if value is not None:
                    values[name] = value
        step = values.get("step")
        total = values.get("total")
        step_int = int(step) if step is not None and math.isfinite(step) and step >= 0 else None
        total_int = int(total) if total is not None and math.isfinite(total) and total > 0 else None
        tokens = _finite(values.get("tokens_per_s"))
        loss = values.get("loss")
        if step_int is None and tokens is None and loss is None:
            return None
        return step_int, total_int, tokens, loss, rank, (), _finite(values.get("step_seconds"))


__all__ = [
    "CANDIDATES", "ProgressPattern", "line_shape", "parse_number", "parse_progress", "progress_fields",
    "progress_possible",
]
