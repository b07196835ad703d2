"""One analysis of a length distribution: what `dflash-watch buckets` prints.

The samples kept are those with ``0 < length <= --max-len``; longer ones
are counted and left out (CONTRACTS section 8), and so are empty ones
(length 0 lies in no bucket ``(b[i-1], b[i]]``). The optimal boundaries and
the ``--compare`` boundaries are judged on the same kept samples; a compare
whose last boundary is below the longest kept sample leaves those samples
out of its figures, and says how many.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batching import Batched, simulate
from .optimal import Histogram, optimal_boundaries, padded_tokens


@dataclass(frozen=True, slots=True)
class Bucket:
    lower: int  # exclusive
    upper: int  # inclusive: every sample is padded to it
    samples: int
    tokens: int
    padded_tokens: int

    @property
    def efficiency(self) -> float:
        return self.tokens / self.padded_tokens if self.padded_tokens else 1.0


@dataclass(frozen=True, slots=True)
class Layout:
    """A set of boundaries applied to the kept samples."""

    boundaries: tuple[int, ...]
    buckets: tuple[Bucket, ...]
    left_out: int  # kept samples above the last boundary
    batched: Batched | None

    @property
    def samples(self) -> int:
        return sum(b.samples for b in self.buckets)

    @property
    def tokens(self) -> int:
        return sum(b.tokens for b in self.buckets)

    @property
    def padded_tokens(self) -> int:
        return sum(b.padded_tokens for b in self.buckets)

    @property
    def efficiency(self) -> float:
        """Real tokens / padded tokens, every sample padded to its bucket's upper boundary."""
        return self.tokens / self.padded_tokens if self.padded_tokens else 1.0


@dataclass(frozen=True, slots=True)
class BucketPlan:
    source: str
    samples: int  # every sample read
    over_max_len: int
    empty: int
    max_len: int | None
    k: int  # buckets asked for; len(optimal.buckets) is fewer when the lengths have fewer distinct values
    token_budget: int | None
    optimal: Layout
    compare: Layout | None

    @property
    def kept(self) -> int:
        return self.samples - self.over_max_len - self.empty


def parse_boundaries(text: str) -> tuple[int, ...]:
    """``--compare``: comma-separated whole numbers, strictly increasing,
    non-negative. A list that does not start at 0 gets the 0 in front (the
    first bucket is ``(0, B0]``)."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise ValueError(f"--compare {text!r}: expected comma-separated boundaries, e.g. 0,770,1216,8192")
    values = []
    for p in parts:
        try:
            values.append(int(p))
        except ValueError:
            raise ValueError(f"--compare: {p!r} is not a whole number") from None
    if values[0] < 0:
        raise ValueError(f"--compare: boundaries must be >= 0, got {values[0]}")
    for a, b in zip(values, values[1:]):
        if b <= a:
            raise ValueError(f"--compare: boundaries must be strictly increasing ({a} then {b})")
    if values[0] != 0:
        values.insert(0, 0)
    if len(values) < 2:
        raise ValueError("--compare: needs at least one boundary above 0")
    return tuple(values)


def layout(hist: Histogram, boundaries: np.ndarray | tuple[int, ...], lengths: np.ndarray | None = None,
           budget: int | None = None) -> Layout:
    b = np.asarray(boundaries, dtype=np.int64)
    _, where = padded_tokens(hist, b)
    n = b.size
    counts = np.zeros(n + 1, np.int64)
    tokens = np.zeros(n + 1, np.int64)
    np.add.at(counts, where, hist.counts)
    np.add.at(tokens, where, hist.values * hist.counts)
    buckets = tuple(
        Bucket(lower=int(b[i - 1]), upper=int(b[i]), samples=int(counts[i]), tokens=int(tokens[i]),
               padded_tokens=int(counts[i]) * int(b[i]))
        for i in range(1, n)
    )
    batched = simulate(lengths, b, budget) if budget is not None and lengths is not None else None
    return Layout(boundaries=tuple(int(x) for x in b), buckets=buckets, left_out=int(counts[n]), batched=batched)


def make_plan(lengths: np.ndarray, k: int, *, source: str = "", max_len: int | None = None,
              compare: tuple[int, ...] | None = None, token_budget: int | None = None) -> BucketPlan:
    """Everything the command reports, from the lengths read."""
    x = np.asarray(lengths, dtype=np.int64)
    over = int((x > max_len).sum()) if max_len is not None else 0
    empty = int((x == 0).sum())
    keep = x > 0
    if max_len is not None:
        keep &= x <= max_len
    kept = x[keep] if (over or empty) else x
    hist = Histogram.of(kept)
    need = token_budget is not None
    best = layout(hist, optimal_boundaries(hist, k), kept if need else None, token_budget)
    other = layout(hist, compare, kept if need else None, token_budget) if compare is not None else None
    return BucketPlan(source=source, samples=int(x.size), over_max_len=over, empty=empty, max_len=max_len, k=k,
                      token_budget=token_budget, optimal=best, compare=other)
