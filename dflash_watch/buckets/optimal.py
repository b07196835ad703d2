"""Exact optimal bucket boundaries by dynamic programming (pure: numpy only).

A sample of length ``x`` in bucket ``(b[i-1], b[i]]`` costs ``b[i]`` padded
tokens. Only the distinct lengths ``v[0] < ... < v[D-1]`` (with counts
``c``) matter: an optimal upper boundary always sits on a length that
occurs (lowering it to the largest length in its bucket pads less), and
the last one is the largest length. With ``C[j]`` the number of samples of
the ``j`` smallest distinct lengths, a bucket holding the distinct lengths
``i..j-1`` costs ``w(i, j) = v[j-1] * (C[j] - C[i])`` and

    f_k(j) = min_{k-1 <= i < j} f_{k-1}(i) + w(i, j)

is the least padded total of ``k`` buckets over the ``j`` smallest lengths.

Why divide and conquer is exact here: for ``a <= b <= c <= d``,
``w(a,c) + w(b,d) - w(a,d) - w(b,c) = (C[b] - C[a]) * (v[c-1] - v[d-1]) <= 0``
(the quadrangle inequality), so the leftmost best split ``opt(j)`` never
moves left as ``j`` grows. Each layer then needs the best split of a middle
``j`` only between the best splits of its neighbours: ``O(D log D)`` per
layer, ``O(K D log D)`` in all. The recursion runs level by level, all the
middles of one level in a few numpy operations, so Python does
``O(K log D)`` steps, not ``O(K D)``. ``tests/core/test_buckets.py`` checks it
against every combination of boundaries on small inputs.

Arithmetic is int64 and exact; ``Histogram`` refuses totals that could
overflow it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Padded totals are summed in int64; refuse inputs whose worst case
# (every sample padded to the largest length) could come near overflow.
_MAX_TOTAL = 1 << 62


class TooLarge(ValueError):
    """Lengths whose padded total would not fit exact int64 arithmetic."""


@dataclass(frozen=True, slots=True, eq=False)
class Histogram:
    """The distinct lengths (ascending, all > 0) and how often each occurs.

    The DP and every efficiency figure work on this, not on the samples:
    1.1M lengths up to 8192 are at most 8192 numbers.
    """

    values: np.ndarray  # int64, strictly increasing, > 0
    counts: np.ndarray  # int64, > 0, same length

    @staticmethod
    def of(lengths: np.ndarray) -> Histogram:
        """From non-negative int64 lengths; zeros must already be left out."""
        x = np.asarray(lengths, dtype=np.int64)
        if x.size == 0:
            return Histogram(np.zeros(0, np.int64), np.zeros(0, np.int64))
        lo, hi = int(x.min()), int(x.max())
        if lo <= 0:
            raise ValueError("lengths must be > 0")
        if hi * x.size >= _MAX_TOTAL:
            raise TooLarge(f"{x.size} lengths up to {hi}: padded totals would overflow exact int64 sums")
        if hi <= max(1 << 20, 4 * x.size):  # a count per integer: O(n), no sort
            counts = np.bincount(x)
            values = np.flatnonzero(counts).astype(np.int64)
            return Histogram(values, counts[values].astype(np.int64))
        values, counts = np.unique(x, return_counts=True)
        return Histogram(values.astype(np.int64), counts.astype(np.int64))

    @property
    def samples(self) -> int:
        return int(self.counts.sum())

    @property
    def tokens(self) -> int:
        """Real tokens: the sum of the lengths."""
        return int((self.values * self.counts).sum())


def padded_tokens(hist: Histogram, boundaries: np.ndarray | list[int]) -> tuple[int, np.ndarray]:
    """Padded tokens of the samples up to the last boundary, and the bucket
    index of each distinct length (``len(boundaries)`` for those above it:
    they are left out). Bucket ``i`` (1-based) is ``(b[i-1], b[i]]``."""
    b = np.asarray(boundaries, dtype=np.int64)
    where = np.searchsorted(b, hist.values, side="left")  # b[i-1] < v <= b[i]
    inside = where < b.size
    total = int((b[where[inside]] * hist.counts[inside]).sum())
    return total, where


def optimal_boundaries(hist: Histogram, k: int) -> np.ndarray:
    """Boundaries ``[0, b1, ..., bK']`` that minimise the padded tokens of
    ``hist`` over all choices of at most ``k`` buckets; ``K' = min(k, D)``
    (more buckets than distinct lengths cannot pad less than zero)."""
    if k < 1:
        raise ValueError("k must be >= 1")
    d = hist.values.size
    if d == 0:
        return np.zeros(1, np.int64)
    if k >= d:
        return np.concatenate(([0], hist.values)).astype(np.int64)
    v = hist.values
    cum = np.concatenate(([0], np.cumsum(hist.counts))).astype(np.int64)
    # f[j] for one layer: the least padded total over the j smallest lengths.
    f = v * cum[1:]  # one bucket: all padded to v[j-1]
    f = np.concatenate(([0], f))
    splits = []
    for layer in range(2, k + 1):
        f, opt = _layer(f, v, cum, layer)
        splits.append(opt)
    # Walk back from j = D: each split is where the bucket before it ends.
    ends = [d]
    j = d
    for opt in reversed(splits):
        j = int(opt[j])
        ends.append(j)
    ends.reverse()
    return np.concatenate(([0], v[np.asarray(ends) - 1])).astype(np.int64)


def _layer(prev: np.ndarray, v: np.ndarray, cum: np.ndarray, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """One DP layer: ``f_layer(j)`` for ``j >= layer`` and its leftmost best
    split, by divide and conquer done breadth-first in numpy.

    A segment is (j_lo, j_hi, opt_lo, opt_hi): the ``j`` still to solve and
    the range their best split lies in. Each level solves the middle ``j`` of
    every segment at once and halves the segments around it.
    """
    d = v.size
    f = np.full(d + 1, -1, dtype=np.int64)  # -1: not reachable with this many buckets
    opt = np.zeros(d + 1, dtype=np.int64)
    jl = np.array([layer], np.int64)
    jh = np.array([d], np.int64)
    ol = np.array([layer - 1], np.int64)
    oh = np.array([d - 1], np.int64)
    while jl.size:
        mid = (jl + jh) // 2
        hi = np.minimum(oh, mid - 1)
        sizes = hi - ol + 1  # >= 1: ol <= opt(mid) <= mid - 1 always holds
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        seg = np.repeat(np.arange(mid.size), sizes)
        i = np.arange(sizes.sum()) - starts[seg] + ol[seg]
        j = mid[seg]
        cost = prev[i] + v[j - 1] * (cum[j] - cum[i])
        best = np.minimum.reduceat(cost, starts)
        # Leftmost position of each segment's minimum (np.argmin's choice).
        hits = np.flatnonzero(cost == best[seg])
        first = hits[np.searchsorted(hits, starts)]
        arg = i[first]
        f[mid] = best
        opt[mid] = arg
        left = jl <= mid - 1
        right = mid + 1 <= jh
        jl, jh, ol, oh = (
            np.concatenate((jl[left], mid[right] + 1)),
            np.concatenate((mid[left] - 1, jh[right])),
            np.concatenate((ol[left], arg[right])),
            np.concatenate((arg[left], oh[right])),
        )
    return f, opt
