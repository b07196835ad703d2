"""Which readers a line goes through, in which order: its plan.

A dict (HF Trainer, JSON lines) first, then a tqdm bar, then the generic
readers (step words, ``|`` fields or words, values before their units).
A dict that holds nothing a detector needs leaves a ``TRY`` op, so that
the readers after it get their turn on the rest of the line; a dict right
after a tqdm bar (HF Trainer's log line glued to its bar) is read with it.
"""

from __future__ import annotations

from .progress_ops import TRY, Ops, Plan, settle_counts
from .progress_readers import plan_dict, plan_fields, plan_rate, plan_tokens
from .progress_tqdm import might_be_bar, plan_tqdm
from .ranks import split_rank

NO_PLAN: tuple[int, Ops] = (-1, ())


def plan(line: str) -> tuple[int, Ops]:
    """(where a rank prefix starts or -1, ops) for every line of this shape."""
    text = line.strip()
    if not text:
        return NO_PLAN
    base = len(line) - len(line.lstrip())
    rank_at = -1
    if text[0] == "[":
        rank, rest = split_rank(text)
        if rank is not None:
            rank_at = base
        base += len(text) - len(rest)
        text = rest
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
            ops.ops = [*found.ops, (TRY,)]
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
