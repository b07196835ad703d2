"""The baseline file's figures as the detectors' references.

``figures_of(baseline)``: the good run's figures the detectors judge
against (``detectors.registry.BaselineFigures``), read from the baseline
file's keys (CONTRACTS section 6: ``throughput_tokens_per_s`` and the
optional ``padding_efficiency``, ``recompiles_per_hour``,
``alloc_retries_per_hour``). A key that is absent or not a usable number
is unknown, never zero: an older baseline file judges padding by the
floor, as if there were none. The Monitor calls it when it is built and
on every ``set_baseline``.
"""

from __future__ import annotations

import math
from typing import Any

from dflash_watch.detectors.registry import BaselineFigures

# Baseline keys (CONTRACTS section 6, optional) and the figure each fills.
PADDING_KEY = "padding_efficiency"
RECOMPILES_KEY = "recompiles_per_hour"
ALLOC_RETRIES_KEY = "alloc_retries_per_hour"


def _number(value: Any, lo: float, hi: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) and lo <= v <= hi else None


def figures_of(baseline: Any) -> BaselineFigures:
    """The detectors' references from a ``Baseline`` (None: none at all)."""
    if baseline is None:
        return BaselineFigures()
    extra = getattr(baseline, "extra", None) or {}
    padding = _number(extra.get(PADDING_KEY), 0.0, 1.0)
    return BaselineFigures(
        tokens_per_s=baseline.tokens_per_s,
        padding_efficiency=padding if padding else None,
        recompiles_per_hour=_number(extra.get(RECOMPILES_KEY), 0.0, math.inf),
        alloc_retries_per_hour=_number(extra.get(ALLOC_RETRIES_KEY), 0.0, math.inf),
    )
