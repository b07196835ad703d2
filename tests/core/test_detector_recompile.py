"""recompile: limit hits, storms, escalation to critical, quiet resolution."""

from __future__ import annotations

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.recompile import RecompileDetector
from dflash_watch.detectors.registry import DetectorSet
from tests.core.synthetic import T0, drive, merge, recompiles


def test_limit_hit_fires_once_and_resolves_after_a_quiet_period():
    cfg = DetectorConfig()
    scenario = recompiles([T0 + 100 + 5 * i for i in range(6)], hit_limit=True, limit=8)
    alerts = drive(DetectorSet([RecompileDetector(cfg)]), scenario.events, until=T0 + 3600)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert alerts[0].time == T0 + 100 and alerts[0].severity == "warning"
    assert "recompile limit (8) for forward" in alerts[0].message
    assert alerts[1].time == T0 + 125 + cfg.recompile_quiet_s  # delivered by the deadline tick


def test_a_storm_of_non_limit_recompiles_fires_and_scattered_ones_do_not():
    cfg = DetectorConfig()
    scattered = recompiles([T0 + 200 * i for i in range(30)], hit_limit=False)  # 3 per 10 min
    assert drive(DetectorSet([RecompileDetector(cfg)]), scattered.events, until=T0 + 9000) == []
    storm = recompiles([T0 + 1000 + 20 * i for i in range(12)], hit_limit=False)
    alerts = drive(DetectorSet([RecompileDetector(cfg)]), storm.events, until=T0 + 5000)
    assert [a.state for a in alerts] == ["firing", "resolved"]
    assert alerts[0].time == T0 + 1000 + 20 * (cfg.recompile_storm_count - 1)
    assert alerts[0].message.startswith("torch.compile recompiled forward 8 times in 2 min 20 s")


def test_storms_count_per_function():
    cfg = DetectorConfig()
    mixed = merge(*(recompiles([T0 + 60 * i + k for i in range(5)], function=f"f{k}", hit_limit=False) for k in range(4)))
    assert drive(DetectorSet([RecompileDetector(cfg)]), mixed.events) == []


def test_fatal_limit_escalates_to_critical():
    det = RecompileDetector()
    scenario = merge(recompiles([T0 + 10], hit_limit=True, limit=8), recompiles([T0 + 20], function="step", fatal=True, limit=8))
    alerts = drive(DetectorSet([det]), scenario.events)
    assert [(a.state, a.severity) for a in alerts] == [("firing", "warning"), ("resolved", "warning"), ("firing", "critical")]
    assert "the run fails on it" in alerts[-1].message


def test_a_limit_hit_during_a_storm_is_said_and_a_second_one_is_not():
    """torch logs 8 recompiles (a storm: its alert says "recompiled 8
    times") and then that it hit the limit and runs eagerly: the limit was
    only recorded in the open episode, and the alert never said it."""
    from dataclasses import replace

    cfg = DetectorConfig()
    storm = recompiles([T0 + 10 + i for i in range(cfg.recompile_storm_count)], hit_limit=False)
    limit = recompiles([T0 + 20, T0 + 21], hit_limit=True, limit=8)
    events = [replace(e, rank=3) for e in merge(storm, limit).events]
    alerts = drive(DetectorSet([RecompileDetector(cfg)]), events)
    assert [(a.state, a.evidence.get("what")) for a in alerts] == [("firing", "storm"), ("resolved", None), ("firing", "limit")]
    assert "hit its recompile limit (8) for forward on rank 3: it now runs eagerly" in alerts[2].message
    assert [a.rank for a in alerts] == [3, 3, 3]  # the alert's own field, not only its evidence
