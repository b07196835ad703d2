"""The torchrun ChildFailedError cascades of ../shared/realworld (13, 14,
17, 19, 20; labels in SOURCES.md) are one alert per incident, named by the
root cause, with torch elastic's report and the agent's lines merged into
that incident (its episode) rather than alerted on their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_watch.replay import replay

REALWORLD = Path(__file__).resolve().parents[2].parent / "shared" / "realworld"

pytestmark = pytest.mark.skipif(not REALWORLD.is_dir(), reason=f"{REALWORLD} not present")


def incidents(name: str):
    (path,) = REALWORLD.glob(f"{name}_*.log")
    result = replay([str(path)])
    fired = [a for a in result.alerts if a.state == "firing" and a.detector == "crash"]
    return fired, result.monitor.detectors.crash_episodes()


def line(alert) -> int:
    return int(alert.source.rsplit(":", 1)[1])


@pytest.mark.parametrize(("name", "root"), [
    ("13", "child_failed"), ("14", "sigkill"), ("17", "invalid_device_ordinal"), ("19", None), ("20", "disk_full"),
])
def test_the_first_alert_is_the_root_cause_and_none_is_the_agents_own_lines(name: str, root: str | None) -> None:
    fired, _ = incidents(name)
    assert fired[0].evidence["cause"] == root
    assert all(a.evidence["cause"] not in ("child_exit", "torchrun_stopping", "peer_failure") for a in fired)
    if name not in ("13", "14"):  # there the report is all the log holds
        assert all(a.evidence["cause"] != "child_failed" for a in fired)


def test_13_a_report_alone_is_its_own_incident() -> None:
    (alert,), _ = incidents("13")
    assert (alert.kind, alert.evidence["cause"], alert.evidence["rank"], line(alert)) == ("exception", "child_failed", 0, 1)


def test_19_the_rank0_oom_is_the_alert_and_its_report_joins_that_incident() -> None:
    fired, episodes = incidents("19")
    assert [(a.kind, line(a)) for a in fired] == [("cuda_oom", 541), ("exception", 591)]
    oom = next(e for e in episodes if e.kind == "cuda_oom")
    assert oom.report is not None and oom.report.startswith("scripts.base_train FAILED")
    assert oom.collateral == 2  # the "failed (exitcode: 1)" line and the report


def test_20_disk_full_on_all_ranks_with_the_agents_sigterms_is_one_alert() -> None:
    fired, episodes = incidents("20")
    disk = fired[0]
    assert (disk.evidence["cause"], line(disk), disk.evidence["ranks"]) == ("disk_full", 1360, list(range(8)))
    # The ranks' tracebacks carry the last stamp before them, 15 s before
    # torchrun's SIGTERM lines: in replay the alert has left when those are
    # read (live, the hold ends when the log goes quiet, after them). They
    # still join the incident: its episode holds them, and none is a kill.
    (episode,) = [e for e in episodes if e.alert is disk]
    assert episode.report is not None and episode.report.startswith("scripts.mid_train FAILED")
    assert "killed" not in {a.kind for a in fired}


def test_17_the_invalid_device_ordinal_is_the_alert_of_its_cascade() -> None:
    fired, episodes = incidents("17")
    assert [(a.kind, line(a)) for a in fired if a.severity == "critical"] == [("cuda_error", 590)]
    first = next(e for e in episodes if e.kind == "cuda_error")
    assert first.report is not None and first.report.startswith("scripts.base_train FAILED")
