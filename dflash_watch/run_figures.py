"""The Monitor's figures beyond throughput: baseline keys in, probe figures kept.

Two small jobs the Monitor delegates so that it stays one loop:

* ``figures_of(baseline)``: the good run's figures the detectors judge
  against (``detectors.registry.BaselineFigures``), read from the baseline
  file's keys (CONTRACTS section 6: ``throughput_tokens_per_s`` and the
  optional ``padding_efficiency``, ``recompiles_per_hour``,
  ``alloc_retries_per_hour``). A key that is absent or not a usable number
  is unknown, never zero: an older baseline file judges padding by the
  floor, as if there were none.
* ``LatestProbes``: the latest probe line per rank, for the dashboard, the
  metrics and "what changed" (bounded: the ranks seen last).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

from dflash_watch.detectors.registry import BaselineFigures
from dflash_watch.parsers.events import ProbeSample

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


class LatestProbes:
    """The last probe line of each rank, the ``max_ranks`` seen last."""

    __slots__ = ("_by_rank", "_max")

    def __init__(self, max_ranks: int = 1024) -> None:
        self._by_rank: OrderedDict[int | None, ProbeSample] = OrderedDict()
        self._max = max_ranks

    def add(self, sample: ProbeSample) -> None:
        by_rank = self._by_rank
        by_rank[sample.rank] = sample
        by_rank.move_to_end(sample.rank)
        if len(by_rank) > self._max:
            by_rank.popitem(last=False)

    def by_rank(self) -> dict[int | None, ProbeSample]:
        """A copy, ranks in order (None, a probe without a rank, first)."""
        return dict(sorted(self._by_rank.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))

    def __len__(self) -> int:
        return len(self._by_rank)
