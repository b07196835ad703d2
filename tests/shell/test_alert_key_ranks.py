"""``Alert.key`` carries no rank, and need not (issue 18): the straggler
detector names a second slow rank only after the first one resolved, so two
ranks' episodes never share an open key in the AlertBook or the sinks'
episode tracking, and each gets its own webhook fingerprint.

The fingerprints are read where a router reads them: in the bodies a real
HTTP server on loopback received from a real webhook sink.
"""

from __future__ import annotations

import json

from loopback_http import LoopbackServer
from sink_helpers import Notes, dispatcher

from dflash_watch.alertbook import AlertBook
from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.straggler import Straggler
from dflash_watch.parsers.events import ProbeSample


def _two_slow_ranks() -> list[Alert]:
    """Ranks 2 and 3 both slow (no GPU mapping: ``gpu`` is None); rank 2 recovers."""
    det = Straggler(DetectorConfig(straggler_warmup_s=0.0))
    out: list[Alert] = []
    for i in range(1, 1200):
        for r in range(4):
            st = 0.9 if r == 2 and i < 600 else 0.7 if r == 3 else 0.3
            out += det.update(ProbeSample(float(i), rank=r, step=i, step_seconds=st, source=f"rank{r}.log"))
    return out


def test_two_ranks_are_two_episodes_one_after_the_other() -> None:
    alerts = _two_slow_ranks()
    assert [(a.state, a.kind, a.rank, a.gpu) for a in alerts] == [
        ("firing", "slow", 2, None), ("resolved", "slow", 2, None), ("firing", "slow", 3, None)]
    book = AlertBook()
    for a in alerts:
        book.add(a)
        firing = [f for f in book.firing() if f.detector == "straggler"]
        assert len(firing) <= 1  # never two ranks under one key
        if a.state == "firing":
            assert firing == [a]  # the rank shown is the rank that fired
    assert [f.rank for f in book.firing()] == [3]


def test_a_webhook_receiver_gets_one_fingerprint_per_rank_episode() -> None:
    """The firing and the resolve of rank 2 share one fingerprint; rank 3's is its own."""
    notes = Notes()
    with LoopbackServer() as server:
        d = dispatcher({"kind": "webhook", "url": server.url, "source": "node1", "backoff_s": 0.05}, notes=notes)
        for a in _two_slow_ranks():
            d.offer(a)
        bodies = [json.loads(r.body) for r in server.wait_for(3)]
        assert d.close(2.0) == {}
        assert len(server.received) == 3, server.received
    assert [(b["state"], b["rank"], b["host"]) for b in bodies] == [
        ("firing", 2, "node1"), ("resolved", 2, "node1"), ("firing", 3, "node1")]
    fired2, resolved2, fired3 = bodies
    assert fired2["fingerprint"] == resolved2["fingerprint"] != fired3["fingerprint"]
    assert fired2["startsAt"] == resolved2["startsAt"] != fired3["startsAt"]
    assert "endsAt" in resolved2 and "endsAt" not in fired3
    assert notes.items == []
