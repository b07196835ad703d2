"""Which readers a line goes through, in which order: its plan.

A dict (HF Trainer, JSON lines) first, then a tqdm bar, then the generic
readers (step words, ``|`` fields or words, values before their units).
A dict that holds nothing a detector needs leaves a ``TRY`` op, so that
the readers after it get their turn on the rest of the line; a dict right
after a tqdm bar (HF Trainer's log line glued to its bar) is read with it.

Shapes: a plan is keyed on the line's UTF-8 bytes with ASCII digits 1-9
made 0 (bytes are translated in C, ~10x faster than str.translate). UTF-8
never uses 0x30-0x39 inside a multi-byte character, so equal keys mean equal
text but for digits, and lines of one shape share one plan (``ops``).
"""

from __future__ import annotations

import re

from ..ranks import rank_span
from .fast import FastPlan, fast_plan
from .ops import TRY, Ops, Plan, RunOps, runnable, settle_counts
from .readers import plan_dict, plan_fields, plan_rate, plan_tokens
from .tqdm_bar import might_be_bar, plan_tqdm

NO_PLAN: tuple[int, Ops] = (-1, ())

# A Python exception line ("RuntimeError: boom at step 10", torch's
# "[rank0]: torch.OutOfMemoryError: ..."): the crash's words, never a
# progress report. Read as one (a step only), it became the newest
# progress, and the dashboard's header, which follows the training loop's
# progress only, stopped two steps before the crash.
_EXCEPTION_LINE = re.compile(r"(?:\[[^\]]*\]:?\s*)*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w+(?:Error|Exception|Interrupt):\s")


def plan(line: str) -> tuple[int, Ops]:
    """(where the rank prefix's digits start or -1, ops) for every line of
    this shape (``ranks.rank_digits`` reads them there)."""
    text = line.strip()
    if not text:
        return NO_PLAN
    base = len(line) - len(line.lstrip())
    rank_at = -1
    if text[0] == "[":
        span = rank_span(text)
        if span is not None:
            rank_at = base + span[0]
            base += span[2]
            text = text[span[2] :]
    if _EXCEPTION_LINE.match(text):
        return NO_PLAN
    ops = Plan(base)
    brace = text.find("{")
    if brace >= 0 and ("'" in text or '"' in text):
        found = Plan(base)
        if plan_dict(found, text, brace):
            if found.summary:
                return rank_at, _done(found, line)
            # HF Trainer writes its log dict right after the training bar,
            # on the bar's line: the bar's count is the dict's step.
            if brace > 0 and might_be_bar(text[:brace]) and plan_tqdm(ops, text[:brace]) is True:
                ops.ops.extend(found.ops)
                return rank_at, _done(ops, line)
            ops.ops = [*found.ops, TRY]
        elif "_runtime" in text:
            return NO_PLAN
    if might_be_bar(text):
        bar = plan_tqdm(ops, text)
        if bar is not False:  # None: no more ops, so the dict's result or None
            return rank_at, _done(ops, line)
    ops.step(text)
    if text.count("|") >= 2:
        plan_fields(ops, text)
    else:
        plan_tokens(ops, text)
    plan_rate(ops, text)
    return rank_at, _done(ops, line)


def _done(ops: Plan, line: str) -> Ops:
    return tuple(settle_counts(ops.ops, line))


_SHAPE = bytes.maketrans(b"123456789", b"000000000")
# shape -> (rank_at: the rank's digits or -1, ops as ``run`` reads them, fast plan or None)
PLANS: dict[bytes, tuple[int, RunOps, FastPlan | None]] = {}
PLANS_MAX = 512
PLAN_LINE_MAX = 2048  # longer lines are planned every time (bounded memory)


def line_shape(line: str) -> bytes:
    """The key of a line's plan: its UTF-8 with ASCII digits 1-9 made 0.

    The stream keys its own per-shape facts on it too, and hands it back to
    ``progress_fields`` so that a line is encoded once.
    """
    # surrogatepass: decoded logs may hold lone surrogates; any str encodes.
    return line.encode("utf-8", "surrogatepass").translate(_SHAPE)


def planned(line: str, shape: bytes) -> tuple[int, RunOps, FastPlan | None]:
    rank_at, ops = plan(line)
    return rank_at, runnable(ops), (fast_plan(ops, line) if ops else None)


def plan_of(line: str, shape: bytes) -> tuple[int, RunOps, FastPlan | None]:
    """The cached plan of ``line``'s shape, planned on first sight."""
    found = PLANS.get(shape)
    if found is None:
        if len(PLANS) >= PLANS_MAX:
            PLANS.clear()
        found = PLANS[shape] = planned(line, shape)
    return found
