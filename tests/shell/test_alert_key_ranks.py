"""``Alert.key`` carries no rank, and need not (issue 18): the straggler
detector names a second slow rank only after the first one resolved, so two
ranks' episodes never share an open key in the AlertBook or the sinks'
episode tracking, and each gets its own webhook fingerprint.
"""

from __future__ import annotations

from dflash_watch.alertbook import AlertBook
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.straggler import Straggler
from dflash_watch.parsers.events import ProbeSample
from dflash_watch.sinks.payloads import EpisodeStarts, dedup_key


def _two_slow_ranks() -> list:
    """Ranks 2 and 3 both slow (no GPU mapping: ``gpu`` is None); rank 2 recovers."""
    det = Straggler(DetectorConfig(straggler_warmup_s=0.0))
    out = []
    for i in range(1, 1200):
        for r in range(4):
            st = 0.9 if r == 2 and i < 600 else 0.7 if r == 3 else 0.3
            out += det.update(ProbeSample(float(i), rank=r, step=i, step_seconds=st, source=f"rank{r}.log"))
    return out


def test_two_ranks_are_two_episodes_one_after_the_other() -> None:
    alerts = _two_slow_ranks()
    assert [(a.state, a.kind, a.rank, a.gpu) for a in alerts] == [
        ("firing", "slow", 2, None), ("resolved", "slow", 2, None), ("firing", "slow", 3, None)]
    book, starts = AlertBook(), EpisodeStarts()
    fingerprints = []
    for a in alerts:
        book.add(a)
        fingerprints.append(dedup_key(a, starts.start_of(a), "node1"))
        firing = [f for f in book.firing() if f.detector == "straggler"]
        assert len(firing) <= 1  # never two ranks under one key
        if a.state == "firing":
            assert firing == [a]  # the rank shown is the rank that fired
    assert [f.rank for f in book.firing()] == [3]
    # The firing and the resolve of rank 2 share one fingerprint; rank 3's is its own.
    assert fingerprints[0] == fingerprints[1] != fingerprints[2]
