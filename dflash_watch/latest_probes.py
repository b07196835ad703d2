"""The latest probe line of each rank, kept by the Monitor.

For the dashboard, the metrics and "what changed": what each rank's probe
said last (CONTRACTS section 9), bounded to the ranks seen last so a job
that cycles through many ranks (relaunches, elastic) cannot grow it.
"""

from __future__ import annotations

from collections import OrderedDict

from dflash_watch.parsers.events import ProbeSample


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
