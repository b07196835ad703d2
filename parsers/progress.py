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
from dataclasses import dataclass, field

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


class _Fields:
    """Accumulates what one line says, then becomes a Progress (or not)."""

    __slots__ = ("step", "total", "tokens", "loss", "step_seconds", "metrics")

    def __init__(self) -> None:
        self.step: int | None = None
        self.total: int | None = None
        self.tokens: float | None = None
        self.loss: float | None = None
        self.step_seconds: float | None = None
        self.metrics: list[tuple[str, float]] = []

    def add(self, key: str, value: float, unit: str | None) -> None:
        norm, key_unit = _norm(key)
        if norm in _STEP_KEYS:
            if self.step is None and math.isfinite(value) and value >= 0 and value == int(value):
                self.step = int(value)
            return
        if norm in _TOTAL_KEYS:
            if self.total is None and math.isfinite(value) and value > 0 and value == int(value):
                self.total = int(value)
            return
        if norm in _LOSS_KEYS and self.loss is None:
            self.loss = value
            return
        if norm in _TOKENS_KEYS and self.tokens is None:
            self.tokens = _finite(value)
            if self.tokens is not None:
                return
        elif norm in _STEP_TIME_KEYS and self.step_seconds is None:
            seconds = _SECONDS.get(unit or key_unit or "s")
            if seconds is not None:
                self.step_seconds = _finite(value * seconds)
                if self.step_seconds is not None:
                    return
        if key != key.upper():  # "DP=0", "W0531 18" are not metrics
            self.metrics.append((key, value))

    def add_text(self, key: str, text: str, key_pattern: re.Pattern[str]) -> None:
        """Add ``key`` = ``text`` if the key is a name and the text a number."""
        m = _VALUE.fullmatch(text)
        if m is None or key_pattern.match(key) is None:
            return
        try:
            value = float(m.group("num").replace(",", ""))
        except ValueError:
            return
        si = m.group("si")
        if si:
            value *= _SI[si]
        self.add(key, value, m.group("unit"))

    def progress(self, time: float, source: str, rank: int | None) -> Progress | None:
        if self.step is None and self.loss is None and self.tokens is None:
            return None
        return Progress(
            time=time, source=source, step=self.step, total_steps=self.total,
            tokens_per_s=self.tokens, loss=self.loss, rank=rank,
            metrics=tuple(self.metrics), step_seconds=self.step_seconds,
        )


def _read_fields(fields: _Fields, text: str) -> None:
    """``key: value`` fields between ``|`` (nanochat, nanotron, Megatron)."""
    for part in text.split("|"):
        colon = part.find(":")
        equal = part.find("=")
        sep = colon if equal < 0 or 0 <= colon < equal else equal
        if sep > 0:
            key = part[:sep].strip()
            value = part[sep + 1:].strip(_STRIP)
        else:
            key, _, value = part.strip().rpartition(" ")  # "loss 2.31"
            key = key.rstrip()
        if key and value:
            fields.add_text(key, value, _FIELD_KEY)


def _read_tokens(fields: _Fields, text: str) -> None:
    """``key:value``, ``key: value``, ``key=value`` and ``key value`` words."""
    words = text.split()
    count = len(words)
    i = 0
    while i < count:
        word = words[i]
        i += 1
        colon = word.find(":")
        equal = word.find("=")
        sep = colon if equal < 0 or 0 <= colon < equal else equal
        if sep == 0:
            continue
        if sep > 0:
            key = word[:sep]
            value = word[sep + 1:]
            if not value:
                if i == count:
                    break
                value = words[i]
                i += 1
        else:
            if i == count or word[0] not in _KEY_START:
                continue
            key = word
            value = words[i]  # the next word stays in play as a key
        first = key[0]
        if first in _KEY_START:
            fields.add_text(key, value.strip(_STRIP), _KEY)


_KEY_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


def _read_step(fields: _Fields, text: str) -> None:
    m = _STEP.search(text)
    if m is not None:
        fields.step = int(m.group(1))
        total = m.group(2) or m.group(3)
        if total is not None and int(total) > 0:
            fields.total = int(total)


def _read_rate(fields: _Fields, text: str) -> None:
    """Throughput written as value then unit: ``21.5 Ktok/s``."""
    if fields.tokens is not None:
        return
    for m in _TOK_UNIT.finditer(text):
        words = text[max(0, m.start() - 40): m.start()].split()
        if not words:
            continue
        scale = 1.0
        last = words[-1]
        if last in _SI:  # "21.5 Ktok/s"
            scale = _SI[last]
            if len(words) < 2:
                continue
            last = words[-2]
        elif last[-1:] in _SI:  # "21.5Ktok/s"
            scale = _SI[last[-1]]
            last = last[:-1]
        number = _VALUE.fullmatch(last)
        if number is None or number.group("si") or number.group("unit"):
            continue
        try:
            value = float(number.group("num").replace(",", "")) * scale
        except ValueError:
            continue
        fields.tokens = _finite(value)
        return


def _parse_dict(text: str, brace: int, time: float, source: str, rank: int | None) -> Progress | None:
    """HF Trainer dict reprs and JSON lines; a ``*_runtime`` dict is a summary."""
    fields = _Fields()
    values: list[tuple[str, float]] = []
    for m in _PAIR.finditer(text, brace):
        key = m.group("key")
        if key in _SUMMARY_KEYS:
            return None
        raw = m.group("raw")
        if raw is None:
            raw = m.group("sq") if m.group("sq") is not None else m.group("dq")
        value = parse_number(raw)
        if value is not None:
            values.append((key, value))
    if not values:
        return None
    for key, value in values:
        fields.add(key, value, None)
    if fields.step is None and brace > 0:
        _read_step(fields, text[:brace])  # SpecForge: "step 120: {...}"
    return fields.progress(time, source, rank)


def _parse_tqdm(text: str, time: float, source: str, rank: int | None) -> Progress | None | bool:
    """A tqdm bar; False when the line is no bar at all (try the generic reader)."""
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
    fields = _Fields()
    fields.step = int(count.group(1))
    total = count.group(2)
    if total is not None and int(total) > 0:
        fields.total = int(total)
    rate = m.group("rate")
    if rate != "?":
        value = float(rate)
        if m.group("unit") == "s/it":
            fields.step_seconds = _finite(value)
        elif value > 0:
            fields.step_seconds = _finite(1.0 / value)
    post = m.group("post")
    if post:
        _read_tokens(fields, post.replace(",", " "))
    return fields.progress(time, source, rank)


def parse_progress(
    line: str, time: float, source: str, rank: int | None = None,
    pattern: ProgressPattern | None = None,
) -> Progress | None:
    """The progress a line reports, or None. Never raises on any text.

    ``pattern`` (from the config) replaces the built-in formats entirely, so
    that a user who names their format gets exactly that and nothing else.
    """
    text = line.strip()
    if not text:
        return None
    if text[0] == "[":
        prefix_rank, text = split_rank(text)
        if rank is None:
            rank = prefix_rank
    if pattern is not None:
        return pattern.parse(text, time, source, rank)
    brace = text.find("{")
    if brace >= 0 and ("'" in text or '"' in text):
        found = _parse_dict(text, brace, time, source, rank)
        if found is not None or "_runtime" in text:
            return found
    if "it/s" in text or "s/it" in text:
        bar = _parse_tqdm(text, time, source, rank)
        if bar is not False:
            return bar  # type: ignore[return-value]
    fields = _Fields()
    _read_step(fields, text)
    if text.count("|") >= 2:
        _read_fields(fields, text)
    else:
        _read_tokens(fields, text)
    if "tok" in text:
        _read_rate(fields, text)
    return fields.progress(time, source, rank)


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
        return Progress(
            time=time, source=source, step=step_int, total_steps=total_int,
            tokens_per_s=tokens, loss=loss, rank=rank,
            step_seconds=_finite(values.get("step_seconds")),
        )


__all__ = ["CANDIDATES", "ProgressPattern", "parse_number", "parse_progress"]
