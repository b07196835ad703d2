"""tqdm bars, as ``tqdm.format_meter`` writes them.

``{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]``,
or without a total ``{desc}: {n_fmt}{unit} [{elapsed}, {rate_fmt}{postfix}]``.

- ``rate_fmt`` is ``{rate:5.2f}{unit}/s``, or ``{1/rate:5.2f}s/{unit}``
  when an item takes over a second (HF Trainer's ``5.07s/it``), or ``?``
  for the rate before the first update; with ``unit_scale`` the number
  takes an SI prefix (``1.23ktok/s``), and so do the counts.
- ``elapsed`` is ``[H:]MM:SS`` (``format_interval``): the run's own clock
  where the log has no timestamps.
- ``postfix`` is ``, `` then ``set_postfix``'s ``k=v`` pairs joined by
  ``, `` (numbers through ``format_num``: ``2.1e+4``), or
  ``set_postfix_str``'s text as given.
- ``desc`` (``set_description``) is read for numbers too
  (``loss 2.31: 45%|...``), and says whether the bar is the training loop
  at all (``Loading checkpoint shards`` is not).

The unit tells what the rate counts: iterations (``it``, HF Trainer,
Lightning), tokens or samples; for the latter two the count is no step.
"""

from __future__ import annotations

import re

from ..numbers import TQDM_SI
from . import keys
from .ops import Plan, Tqdm, span
from .readers import plan_tokens

BAR = re.compile(
    r"\[(?P<elapsed>[0-9]{1,9}(?::[0-9]{2}){1,2})(?:<(?:[0-9]{1,9}(?::[0-9]{2}){1,2}|\?))?,\s*"
    r"(?:(?P<rate>[0-9]+(?:\.[0-9]+)?)(?P<si>[kMGTPEZY])?|\?)\s*"
    r"(?:s/(?P<inv>[A-Za-z_]+)|(?P<unit>[A-Za-z_]+)/s)"
    r"(?P<post>[^\]]*)\]"
)
_COUNT_NUM = r"[0-9]{1,18}(?:\.[0-9]+)?[kMGTPEZY]?"
COUNT = re.compile(rf"(?P<n>{_COUNT_NUM})(?:/(?P<total>{_COUNT_NUM}|\?))?(?P<unit>[A-Za-z_]*)\Z")
_DIGITS = re.compile(r"[0-9]{1,18}\Z")
UNITS = {
    **dict.fromkeys(("it", "its", "step", "steps", "iter", "iters"), keys.STEPS_RATE),
    **dict.fromkeys(("tok", "toks", "token", "tokens"), keys.TOKENS),
    **dict.fromkeys(("sample", "samples"), keys.SAMPLES),
}
# Bars that are not the training loop (loading, preprocessing, evaluation).
NOT_TRAINING = re.compile(
    r"(?i)load|download|fetch|map|filter|token|generat|evaluat|valid|extract|convert|process|shard|"
    r"upload|saving|compil|warm|prefill|sampl|preprocess"
)
# A comma that is no thousands separator splits postfix pairs
# (``loss=0.5, tok_s=2.02e+4``; ``set_postfix_str("a=1,b=2")``).
_PAIR_COMMA = re.compile(r",(?![0-9]{3}(?![0-9]))")


def might_be_bar(text: str) -> bool:
    """Cheap test before ``plan_tqdm``: a rate unit and a bracket."""
    return ("/s" in text or "s/" in text) and "[" in text


def plan_tqdm(plan: Plan, text: str) -> bool | None:
    """A tqdm bar; False when the line is no bar at all (try the generic
    readers), None when it is a bar but not the training loop's."""
    m = BAR.search(text)
    if m is None:
        return False
    unit = m.group("inv") or m.group("unit")
    kind = UNITS.get(unit)
    if kind is None:
        return False  # B/s, img/s...: not a rate this watcher knows
    bracket = m.start()
    before = text[:bracket].rstrip()
    cut = max(before.rfind(" "), before.rfind("|"))
    count = COUNT.match(before, cut + 1)
    if count is None:
        return False
    desc = before[:cut + 1]
    percent = desc.rfind("%|")
    if percent >= 0:
        desc = desc[:percent].rstrip("0123456789 ")
    if NOT_TRAINING.search(desc):
        return None
    desc = desc.rstrip().rstrip("|").rstrip().rstrip(":")
    if desc:
        plan_tokens(plan, desc)
    base = plan.base
    n = total = (-1, -1)
    if kind == keys.STEPS_RATE and _DIGITS.match(count.group("n")):
        n = span(count, "n", base)
        if count.group("total") and _DIGITS.match(count.group("total")):
            total = span(count, "total", base)
    rate = (-1, -1) if m.group("rate") is None else span(m, "rate", base)
    si = m.group("si")
    plan.ops.append(Tqdm(
        *n, *total, *rate, TQDM_SI[si] if si else 1.0, kind, m.group("inv") is not None, *span(m, "elapsed", base)
    ))
    post = m.group("post")
    if post:
        inner = Plan(base + m.start("post"))
        plan_tokens(inner, _PAIR_COMMA.sub(" ", post))
        plan.ops.extend(inner.ops)
    return True
