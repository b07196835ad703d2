"""Token-budget batches per bucket, as a length-bucketed loader fills them.

The order is the one a DFlash-style loader uses: the samples of one bucket
in data order, shuffled (a seeded permutation, so a run is repeatable),
then taken greedily: a sample joins the open batch while
``len(batch) * max_len_in_batch <= budget`` still holds with it, else the
batch closes and the sample opens the next. A batch is padded to its
longest sample, not to the bucket's boundary. A sample longer than the
budget alone is a batch of one (counted in ``over_budget``): a loader has
to emit or drop it, and dropping would hide it.

Greedy filling is sequential, but batches are far fewer than samples: each
batch is found with one running maximum over a window of the samples that
follow (doubled until the batch closes), so Python steps once per batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEED = 0  # the within-bucket shuffle; fixed so that two runs print the same


@dataclass(frozen=True, slots=True)
class Batched:
    """What filling every bucket's batches gave."""

    tokens: int  # real tokens of the samples batched
    padded_tokens: int  # sum over batches of len(batch) * longest sample
    batches: int
    over_budget: int  # samples longer than the budget, each alone in a batch

    @property
    def efficiency(self) -> float:
        return self.tokens / self.padded_tokens if self.padded_tokens else 1.0


def fill_batches(lengths: np.ndarray, budget: int) -> tuple[int, int, int]:
    """Greedy fill of ``lengths`` in the given order: (padded tokens,
    batches, samples over the budget)."""
    x = np.asarray(lengths, dtype=np.int64)
    n = x.size
    pos = padded = batches = 0
    window = 64
    while pos < n:
        while True:
            seg = x[pos: pos + window]
            top = np.maximum.accumulate(seg)
            over = np.flatnonzero(top * np.arange(1, seg.size + 1) > budget)
            if over.size:
                size = max(int(over[0]), 1)  # a sample over the budget goes alone
                break
            if pos + seg.size >= n:
                size = seg.size
                break
            window *= 2
        padded += size * int(top[size - 1])
        batches += 1
        pos += size
        window = max(2 * size, 16)
    over_budget = int((x > budget).sum())
    return padded, batches, over_budget


def simulate(lengths: np.ndarray, boundaries: np.ndarray, budget: int, seed: int = SEED) -> Batched:
    """Fill batches of at most ``budget`` tokens in each bucket of
    ``boundaries`` over the samples ``lengths`` (data order). Samples above
    the last boundary, or of length 0, belong to no bucket and are left out."""
    if budget < 1:
        raise ValueError("budget must be >= 1")
    x = np.asarray(lengths, dtype=np.int64)
    b = np.asarray(boundaries, dtype=np.int64)
    bucket = np.searchsorted(b, x, side="left")
    keep = (bucket >= 1) & (bucket < b.size) & (x > 0)
    x, bucket = x[keep], bucket[keep]
    # Group by bucket, data order kept within each (a stable sort), then one
    # seeded shuffle per bucket.
    order = np.argsort(bucket, kind="stable")
    x, bucket = x[order], bucket[order]
    cuts = np.flatnonzero(np.diff(bucket)) + 1
    rng = np.random.default_rng(seed)
    padded = batches = over = 0
    for part in np.split(x, cuts):
        if part.size:
            p, nb, ov = fill_batches(part[rng.permutation(part.size)], budget)
            padded, batches, over = padded + p, batches + nb, over + ov
    return Batched(tokens=int(x.sum()), padded_tokens=padded, batches=batches, over_budget=over)
