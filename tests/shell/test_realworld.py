"""Every real training log of ../shared/realworld replays without an error
and reports what its label in SOURCES.md says.

Each case goes through the whole shell: `replay()` reads the file with the
tailer's reader, the pure parsers and detectors run in the Monitor, and the
alerts come out as contract JSON. Line numbers are checked against the ones
SOURCES.md names.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_watch.replay import replay

ROOT = Path(__file__).resolve().parents[2]
REALWORLD = ROOT.parent / "shared" / "realworld"

pytestmark = pytest.mark.skipif(not REALWORLD.is_dir(), reason=f"{REALWORLD} not present")


def run(name: str):
    (path,) = REALWORLD.glob(f"{name}_*.log")
    result = replay([str(path)])
    fired = [a for a in result.alerts if a.state == "firing"]
    crashes = [(a.kind, int(a.source.rsplit(":", 1)[1]), a.evidence.get("cause")) for a in fired if a.detector == "crash"]
    return result, fired, crashes


def by(fired, detector):
    return [a for a in fired if a.detector == detector]


# name -> (kind, line, cause) of each crash alert that must be there
CRASHES = {
    "01": [("nccl_timeout", 98, None)],
    "02": [("cuda_oom", 184, None), ("cuda_oom", 402, None), ("cuda_oom", 573, None), ("cuda_oom", 876, None)],
    "06": [("exception", 650, None), ("missing_module", 1528, None), ("exception", 1737, None)],
    "08": [("killed", 1560, "slurm_cancelled")],
    "09": [("killed", 1919, "slurm_time_limit")],
    "11": [("compile_error", 4, None)],
    "12": [("compile_error", 5, "recompile_limit")],
    "13": [("exception", 1, "child_failed")],
    "14": [("killed", 10, "sigkill")],
    "15": [("cuda_error", 13, "illegal_memory_access")],
    # torchrun's ChildFailedError report is part of its root cause's incident
    # (issue 10: one incident, one alert); the next stage's failure is another.
    "19": [("cuda_oom", 541, None), ("exception", 591, None)],
    "20": [("exception", 1360, "disk_full"), ("exception", 1527, None)],
}


@pytest.mark.parametrize("name", sorted(CRASHES))
def test_crash_logs_report_their_labelled_crashes(name: str) -> None:
    _, fired, crashes = run(name)
    for expected in CRASHES[name]:
        assert expected in crashes, (expected, crashes)
    assert all(a.severity == "critical" for a in by(fired, "crash"))


def test_01_nccl_timeout_is_one_alert_for_both_ranks() -> None:
    _, fired, _ = run("01")
    (alert,) = by(fired, "crash")
    assert alert.evidence["ranks"] == [0, 1] and "Watchdog caught collective operation timeout" in alert.message


def test_02_rank_prefixed_copies_are_not_extra_alerts() -> None:
    _, fired, crashes = run("02")
    assert len(crashes) == 4
    assert all("tried to allocate" in a.message for a in by(fired, "crash"))


def test_06_names_the_missing_module() -> None:
    _, fired, _ = run("06")
    (missing,) = [a for a in by(fired, "crash") if a.kind == "missing_module"]
    assert "'datasets'" in missing.message


def test_20_disk_full_on_all_eight_ranks_is_one_alert() -> None:
    _, fired, _ = run("20")
    (disk,) = [a for a in by(fired, "crash") if a.evidence.get("cause") == "disk_full"]
    assert disk.evidence["ranks"] == list(range(8))


def test_17_invalid_device_ordinal_and_child_failures_then_healthy_training() -> None:
    result, fired, crashes = run("17")
    assert ("cuda_error", 590, "invalid_device_ordinal") in crashes
    # The ChildFailedError report joins the invalid-ordinal incident, not an alert of its own.
    assert not [c for c in crashes if c[2] == "child_failed"]
    (episode,) = [e for e in result.monitor.detectors.crash_episodes() if e.kind == "cuda_error"]
    assert episode.report.startswith("scripts.base_train FAILED")
    # The user's Ctrl-C is reported, but not as a red alarm.
    ctrl_c = [a for a in by(fired, "crash") if a.evidence.get("cause") == "keyboard_interrupt"]
    assert ctrl_c and all(a.severity == "warning" for a in ctrl_c)
    # Nothing fires in the healthy second attempt (from line 1999 on).
    assert all(int(a.source.rsplit(":", 1)[1]) < 1999 for a in fired if ":" in a.source)
    assert result.monitor.throughput.count == 2370  # the tok/sec lines
    assert 30_000 < result.monitor.throughput.last_value < 45_000


@pytest.mark.parametrize("name, function, line", [("05", "muon_update", 23), ("18", "forward", 1067), ("12", "dion2_post_orthogonalize", 1)])
def test_recompile_limit_warnings(name: str, function: str, line: int) -> None:
    _, fired, crashes = run(name)
    first = by(fired, "recompile")[0]
    assert function in first.message and first.source.endswith(f":{line}")
    if name != "12":
        assert crashes == []  # a warning, not fatal


@pytest.mark.parametrize("name", ["03", "04", "07", "10", "16", "18"])
def test_healthy_logs_raise_no_crash_and_no_degradation_alert(name: str) -> None:
    _, fired, _ = run(name)
    bad = [a for a in fired if a.detector in ("crash", "fx_tracing", "throughput_drop", "stall")]
    assert bad == []


@pytest.mark.parametrize(
    "name, count, low, high",
    [
        ("16", 4, 22_800, 22_800),  # tokens_per_sec: 22.8K
        ("07", 105, 6_500, 6_800),  # tps: 6,697
        ("18", 1957, 1_000_000, 1_150_000),  # tok/sec: 1,092,168
        ("20", 1159, 1_000_000, 1_150_000),
    ],
)
def test_throughput_values_are_read_with_their_units(name: str, count: int, low: float, high: float) -> None:
    import numpy as np

    result, _, _ = run(name)
    series = result.monitor.throughput
    assert series.count == count
    _, lo, hi, mean = series.window(10 ** 9)
    assert low <= float(np.median(mean)) <= high


def test_every_log_replays_through_the_cli_as_contract_json() -> None:
    for path in sorted(REALWORLD.glob("*.log")):
        out = subprocess.run(
            [sys.executable, "-m", "dflash_watch.cli", "replay", "--json", str(path)],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )
        assert out.returncode == 0, (path.name, out.stderr)
        for line in out.stdout.splitlines():
            alert = json.loads(line)
            assert alert["state"] in ("firing", "resolved") and alert["severity"] in ("info", "warning", "critical")
            assert alert["source"].startswith(path.name) or alert["detector"] in ("recompile",)


# name -> (line of the labelled loss jump, its loss in the message)
LOSS_JUMPS = {"08": (1511, "26.48"), "09": (1912, "40.75")}


@pytest.mark.parametrize("name", sorted(LOSS_JUMPS))
def test_megatron_labelled_loss_jumps_are_one_spike_each(name: str) -> None:
    """08: 12.1 -> 26.5 at iteration 30 (back to 13.8 at 40); 09: 12.5 ->
    40.8 at iteration 3, then the time limit kills the job."""
    result, fired, _ = run(name)
    line, loss = LOSS_JUMPS[name]
    (spike,) = by(fired, "loss")
    assert (spike.kind, spike.severity, spike.source.rsplit(":", 1)[1]) == ("spike", "warning", str(line))
    assert loss in spike.message
    resolved = [a for a in result.alerts if a.detector == "loss" and a.state == "resolved"]
    assert len(resolved) == 1


def test_training_health_detectors_stay_quiet_on_every_other_shared_log() -> None:
    """The other public logs hold no NaN loss, no straggler and no GPU
    sample: loss, straggler and gpu_health say nothing on them (02 holds a
    crashed run and its rerun at a 15x higher loss: a new run, no spike)."""
    for path in sorted(REALWORLD.glob("*.log")):
        if path.name[:2] in LOSS_JUMPS:
            continue
        result = replay([str(path)])
        health = [(a.detector, a.kind, a.source) for a in result.alerts
                  if a.detector in ("loss", "straggler", "gpu_health")]
        assert health == [], path.name
