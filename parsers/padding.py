"""Padding efficiency as training logs print it, from a progress line's numbers.

The progress readers already keep every number of a line they read
(``Progress.metrics``: ``pad_eff 0.93``, ``'pad_eff': 0.93`` in an HF dict,
``"padding_efficiency": 0.931`` in a JSON line), so padding needs no pass of
its own over the log: this module only says which names mean padding and
how to turn each into an efficiency (real tokens / padded tokens, 0..1):

* an efficiency (``pad_eff``, ``padding_efficiency``...): as printed, a
  value above 1 being a percentage (``93.1%`` is read as 93.1);
* a padding ratio (``padding_ratio``, ``pad_frac``...): 1 - the ratio;
* a padding count (``num_padding_tokens``, ``pad_tokens``) with a token
  count on the same line (``num_tokens``, ``ntokens``,
  ``num_input_tokens_seen``): the count is taken as every token the batch
  holds, padding included (as HF's ``num_input_tokens_seen`` counts
  ``input_ids.numel()``), unless it is smaller than the padding, when it
  can only be the real tokens.

The names are matched after the last ``/`` (``train/pad_eff``), lower case.

A line that states padding and nothing a progress reader takes (an HF
callback's ``{'pad_eff': 0.93, 'epoch': 0.5}``, a bare ``pad_eff 0.93``)
is read by ``padding_line``: the stream finds such lines by ``LITERALS``
with its other candidates, so the rest of the log costs nothing more.

>>> padding_from_metrics((("lr", 3e-4), ("pad_eff", 0.93)))
0.93
>>> round(padding_from_metrics((("padding_efficiency", 93.1),)), 3)
0.931
>>> round(padding_from_metrics((("padding_ratio", 0.07),)), 2)
0.93
>>> padding_from_metrics((("num_padding_tokens", 1000.0), ("num_tokens", 4000.0)))
0.75
>>> padding_from_metrics((("grad_norm", 1.0),)) is None
True
>>> may_state_padding(("grad_norm", "lr")), may_state_padding(("lr", "train/pad_eff"))
(False, True)
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection

from .events import PaddingReport, Progress

# Every padding key holds one of these (the stream's candidate literals).
LITERALS = ("pad_", "padding", "Padding")

EFFICIENCY_KEYS = frozenset({
    "pad_eff", "padding_eff", "pad_efficiency", "padding_efficiency", "padding_efficiency_ratio",
    "token_efficiency", "packing_efficiency", "pad_util", "padding_utilization",
})
RATIO_KEYS = frozenset({
    "padding_ratio", "pad_ratio", "pad_frac", "padding_frac", "padding_fraction", "pad_fraction",
    "padding_rate", "pad_pct", "padding_pct",
})
PAD_COUNT_KEYS = frozenset({"num_padding_tokens", "padding_tokens", "pad_tokens", "num_pad_tokens"})
TOKEN_COUNT_KEYS = frozenset({
    "num_tokens", "ntokens", "n_tokens", "tokens", "num_input_tokens_seen", "input_tokens", "total_tokens",
    "padded_tokens", "num_padded_tokens",
})

_EFF, _RATIO, _PAD, _TOKENS = 1, 2, 3, 4
# Every key a log has shown, and what it is (0: not padding): most lines
# repeat the same few names, so a key costs one dict lookup.
_KIND: dict[str, int] = {}
_KIND_MAX = 4096
# Those of them that are not padding (kind 0): ``may_state_padding`` tests
# a whole collection of names against it at once, in C.
_NOT_PADDING: set[str] = set()


def _kind(key: str) -> int:
    kind = _KIND.get(key)
    if kind is None:
        name = key.rsplit("/", 1)[-1].lower()
        if name in EFFICIENCY_KEYS:
            kind = _EFF
        elif name in RATIO_KEYS:
            kind = _RATIO
        elif name in PAD_COUNT_KEYS:
            kind = _PAD
        elif name in TOKEN_COUNT_KEYS:
            kind = _TOKENS
        else:
            kind = 0
        if len(_KIND) >= _KIND_MAX:
            _KIND.clear()
            _NOT_PADDING.clear()
        _KIND[key] = kind
        if not kind:
            _NOT_PADDING.add(key)
    return kind


def may_state_padding(names: Collection[str]) -> bool:
    """Whether numbers under ``names`` (a line's metric names) can state
    padding: an efficiency or a ratio among them, or a padding count with a
    token count. False: ``padding_from_metrics`` of any numbers under these
    names is None.

    Most logs never print padding, yet every step line's numbers would be
    looked at for it, name by name. Names seen before are tested here all
    at once, in C (a set of the names known not to be padding figures): a
    detector asks about the names of a whole run of step lines in one call
    (True there may still be False for each line: a padding count on one, a
    token count on another). A name not seen before is classified once, as
    ``padding_from_metrics`` classifies it.
    """
    if _NOT_PADDING.issuperset(names):
        return False
    pad = tokens = False
    for name in names:
        kind = _KIND.get(name)
        if kind is None:
            kind = _kind(name)
        if kind == _EFF or kind == _RATIO:
            return True
        if kind == _PAD:
            pad = True
        elif kind == _TOKENS:
            tokens = True
    return pad and tokens


def _fraction(value: float) -> float | None:
    """0..1 as printed, or a percentage above 1 (``93.1``); else None."""
    if not math.isfinite(value) or value < 0:
        return None
    if value > 1.0:
        if value > 100.0:
            return None
        value /= 100.0
    return value


def padding_from_metrics(metrics: tuple[tuple[str, float], ...]) -> float | None:
    """The padding efficiency a line's numbers state, or None."""
    pad = tokens = None
    for key, value in metrics:
        kind = _KIND.get(key)
        if kind is None:
            kind = _kind(key)
        if not kind:
            continue
        if kind == _EFF:
            return _fraction(value)
        if kind == _RATIO:
            ratio = _fraction(value)
            return None if ratio is None else 1.0 - ratio
        if kind == _PAD:
            pad = value
        else:
            tokens = value
    if pad is None or tokens is None or not (math.isfinite(pad) and math.isfinite(tokens)) or pad < 0:
        return None
    if tokens >= pad and tokens > 0:
        return 1.0 - pad / tokens
    total = tokens + pad  # fewer tokens than padding: the count is of real tokens
    return tokens / total if total > 0 else None


# ``key: 0.93``, ``key=0.93``, ``key 93.1%``, ``'key': 0.93``, ``"key": 0.93``;
# a key may hold spaces ("padding efficiency"), made ``_`` before the lookup.
_PAIR = re.compile(
    r"""(?P<key>[A-Za-z_][\w/.]*(?: [a-z_]+)?)['"]?\s*[:=]?\s*"""
    r"""(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?P<pct>%)?"""
)


def padding_line(line: str) -> float | None:
    """The padding efficiency a line states on its own, or None.

    >>> padding_line("2026-11-29 10:00:00 INFO padding efficiency: 93.0%")
    0.93
    >>> padding_line("{'pad_eff': 0.5, 'epoch': 0.25}")
    0.5
    >>> padding_line("tokenizer: padding_side='right'") is None
    True
    """
    metrics = []
    for m in _PAIR.finditer(line):
        words = m.group("key")
        key = words.replace(" ", "_")
        if not _kind(key):
            key = words.rsplit(" ", 1)[-1]  # "INFO pad_eff 0.93": the word before the number
            if not _kind(key):
                continue
        try:
            metrics.append((key, float(m.group("num"))))
        except ValueError:  # pragma: no cover - the pattern only matches numbers
            continue
    return padding_from_metrics(tuple(metrics)) if metrics else None


def padding_report(event: Progress) -> PaddingReport | None:
    """The ``PaddingReport`` a progress line carries in its numbers, if any."""
    metrics = event.metrics
    if not metrics:
        return None
    efficiency = padding_from_metrics(metrics)
    if efficiency is None:
        return None
    return PaddingReport(event.time, efficiency, event.source, event.rank)
