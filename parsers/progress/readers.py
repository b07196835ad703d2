"""The generic readers of progress lines: "name, separator, number, unit".

``key: value`` fields split by ``|`` (nanochat, nanotron, Megatron,
DFlash), ``key value``/``key=value`` words (torchtitan, modded-nanogpt,
tqdm postfixes), values written before their unit (``21.5 Ktok/s``,
``12.5 samples/s``, ``96 ms/iter``) and Python dict reprs / JSON lines (HF
Trainer). Each adds ops to a ``Plan`` (``progress.ops``).
"""

from __future__ import annotations

import re

from ..numbers import SECONDS, SI, VALUE, floats
from . import keys
from .ops import Plan, Rate, stripped

# Keys are words; `|`-separated fields may have several ("lm loss",
# "elapsed time per iteration (ms)") but no word starting with a digit.
KEY = re.compile(r"[A-Za-z_][\w()./@%\-]*\Z")
FIELD_KEY = re.compile(r"[A-Za-z_][\w()./@%\-]*(?:\s+[A-Za-z(][\w()./@%\-]*)*\Z")
STRIP = " \t,;]})"
KEY_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
WORD = re.compile(r"\S+")  # str.split()'s words, with their offsets

# Values written unit-last: find the unit, then read the number before it.
# Per-GPU figures are refused.
_PER_DEVICE = r"(?!\s*(?i:per\s*)?(?i:gpu|device|rank|dev)\b)"
TOK_UNIT = re.compile(r"tok(?:en)?s?\s*/\s*(?:sec|s)(?![\w/])" + _PER_DEVICE)
SAMPLES_UNIT = re.compile(r"(?<![\w/])samples?\s*/\s*(?:sec|s)(?![\w/])" + _PER_DEVICE)
IT_UNIT = re.compile(r"(?<![\w/])(?:it|its|iters?|steps?)\s*/\s*(?:sec|s)(?![\w/])" + _PER_DEVICE)
TIME_UNIT = re.compile(r"(?<![\w/])(?P<unit>ms|s|sec)\s*/\s*(?:it|iter|iteration|step)(?![\w/])")
_UNIT_SECONDS = {"ms": SECONDS["ms"], "s": 1.0, "sec": 1.0}

_PAIR = re.compile(
    r"""['"](?P<key>[^'"\\]{1,64})['"]\s*:\s*(?:'(?P<sq>[^']{0,64})'|"(?P<dq>[^"]{0,64})"|(?P<raw>[^,{}\[\]\s'"][^,}\]\s]{0,63}))"""
)
# A dict that is a run's end-of-training summary (its rates are the run's
# mean), and those that are evaluation's or prediction's (no training rate).
TRAIN_SUMMARY_KEY = "train_runtime"
OTHER_SUMMARY_KEYS = ("eval_runtime", "predict_runtime", "test_runtime")


def plan_fields(plan: Plan, text: str) -> None:
    """``key: value`` fields between ``|`` (nanochat, nanotron, Megatron)."""
    start = 0
    for part in text.split("|"):
        colon = part.find(":")
        equal = part.find("=")
        sep = colon if equal < 0 or 0 <= colon < equal else equal
        if sep > 0:
            key = stripped(text, start, start + sep)
            value = stripped(text, start + sep + 1, start + len(part), STRIP)
        else:  # "loss 2.31": the last word is the value
            a, b = stripped(text, start, start + len(part))
            space = text.rfind(" ", a, b)
            key = (a, a + len(text[a:space].rstrip())) if space >= 0 else (a, a)
            value = (space + 1, b)
        if key[1] > key[0] and value[1] > value[0]:
            plan.value(text, key, value, FIELD_KEY)
        start += len(part) + 1


def plan_tokens(plan: Plan, text: str) -> None:
    """``key:value``, ``key: value``, ``key=value`` and ``key value`` words."""
    words = [m.span() for m in WORD.finditer(text)]
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
            if word[0] not in KEY_START:
                continue  # "100:" is no key: the next word stays in play ("iter 100: loss 2.3")
            key = (a, a + sep)
            value = (a + sep + 1, b)
            if value[1] == value[0]:
                if i == count:
                    break
                value = words[i]
                i += 1
        else:
            if i == count or word[0] not in KEY_START:
                continue
            key = (a, b)
            value = words[i]  # the next word stays in play as a key
        if text[key[0]] in KEY_START:
            plan.value(text, key, stripped(text, value[0], value[1], STRIP), KEY)


def _number_before(plan: Plan, text: str, at: int) -> tuple[int, int, bool, float] | None:
    """The number just before ``text[at:]`` (``21.5 K``, ``21.5K``, ``21.5``):
    its span in the line, whether it has commas, and its SI scale."""
    lo = max(0, at - 40)
    words = [(lo + w.start(), lo + w.end()) for w in WORD.finditer(text[lo:at])]
    if not words:
        return None
    scale = 1.0
    a, b = words[-1]
    last = text[a:b]
    if last in SI:  # "21.5 Ktok/s"
        scale = SI[last]
        if len(words) < 2:
            return None
        a, b = words[-2]
        last = text[a:b]
    elif last[-1:] in SI:  # "21.5Ktok/s"
        scale = SI[last[-1]]
        last = last[:-1]
    number = VALUE.fullmatch(last)
    if number is None or number.group("si") or number.group("unit") or not floats(number.group("num")):
        return None
    a, b = a + number.start("num"), a + number.end("num")
    return plan.base + a, plan.base + b, "," in text[a:b], scale


def plan_rate(plan: Plan, text: str) -> None:
    """Values written before their unit: ``21.5 Ktok/s``, ``12.5
    samples/s``, ``3.4 it/s``, ``1234.5 ms/iteration``. The first of each
    kind counts."""
    units: list[tuple[re.Pattern[str], int]] = []
    if "tok" in text:
        units.append((TOK_UNIT, keys.TOKENS))
    if "sample" in text:
        units.append((SAMPLES_UNIT, keys.SAMPLES))
    if "/s" in text:
        units.append((IT_UNIT, keys.STEPS_RATE))
    if "s/" in text:
        units.append((TIME_UNIT, keys.TIME))
    for unit, kind in units:
        for m in unit.finditer(text):
            found = _number_before(plan, text, m.start())
            if found is None:
                continue
            seconds = _UNIT_SECONDS[m.group("unit")] if kind == keys.TIME else None
            plan.ops.append(Rate(*found, kind, seconds))
            break


def _number_span(text: str, a: int, b: int) -> tuple[int, int, float] | None:
    """Where ``parse_number(text[a:b])`` reads its number, and its scale."""
    a, b = stripped(text, a, b)
    scale = 1.0
    if text[b - 1:b] in SI and b - 1 > a:
        scale = SI[text[b - 1]]
        b = a + len(text[a:b - 1].rstrip())
    return (a, b, scale) if floats(text[a:b]) else None


def plan_dict(plan: Plan, text: str, brace: int) -> bool:
    """HF Trainer dict reprs and JSON lines; False when the line says nothing
    whatever its numbers (no numbers, or an evaluation summary). A training
    summary (``train_runtime``) is read as one (``Plan.summary``)."""
    found = []
    for m in _PAIR.finditer(text, brace):
        key = m.group("key")
        if key in OTHER_SUMMARY_KEYS:
            return False
        if key == TRAIN_SUMMARY_KEY:
            plan.summary = True
        group = "raw" if m.group("raw") is not None else "sq" if m.group("sq") is not None else "dq"
        number = _number_span(text, *m.span(group))
        if number is not None:
            found.append((m.span("key"), number))
    if not found:
        return False
    for key, (a, b, scale) in found:
        plan.put(text, key, (a, b), None if scale == 1.0 else scale, None)
    if brace > 0 and not plan.summary:
        plan.step(text[:brace], only_if_unset=True)  # SpecForge: "step 120: {...}"
    return True
