"""Logs of real frameworks run on CPU (tests/fixtures/realruns, made by
scripts/realruns/make_all.sh) replay to what LABELS.json says.

Unlike ../shared/realworld these logs are unprepared output of runs we made
ourselves, so each failure mode has a known truth: the HF Trainer's tqdm
bar and dict lines, torchrun's rank cascade and its ChildFailedError report,
dynamo's recompile warnings, a faulthandler segfault, a host OOM, a caught
traceback that is not a crash.

Each check of LABELS.json is one test case. The cases today's code does not
meet yet are marked xfail(strict=True) in ``XFAIL`` with the missing
feature: when it lands the case XPASSes, the suite fails, and the entry
must go. Never weaken a label to make a case pass.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import Progress, rate_of
from dflash_watch.replay import log_events, replay

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "realruns"
LABELS: dict[str, Any] = json.loads((FIXTURES / "LABELS.json").read_text())["logs"]

# (log, check) -> the feature the check waits for.
XFAIL: dict[tuple[str, str], str] = {}


def _config(overrides: dict[str, Any]) -> DetectorConfig:
    known = {f.name for f in fields(DetectorConfig)}
    unknown = set(overrides) - known
    assert not unknown, f"LABELS.json config names no DetectorConfig field: {sorted(unknown)}"
    return DetectorConfig(**overrides)


@cache
def _alerts(name: str) -> tuple[Alert, ...]:
    monitor = Monitor(detector_config=_config(LABELS[name].get("config", {})), keep_lines=0)
    return tuple(replay([str(FIXTURES / f"{name}.log")], monitor=monitor).alerts)


@cache
def _progress(name: str) -> tuple[Progress, ...]:
    return tuple(e for e in log_events(str(FIXTURES / f"{name}.log")) if isinstance(e, Progress))


def _line(alert: Alert) -> int | None:
    _, _, tail = alert.source.rpartition(":")
    return int(tail) if tail.isdigit() else None


def matches(alert: Alert, match: dict[str, Any]) -> bool:
    """Whether one alert is what a LABELS.json ``match`` describes."""
    ev = alert.evidence
    for key, want in match.items():
        if key in ("detector", "severity", "kind"):
            ok = getattr(alert, key) == want
        elif key == "exc_type":
            ok = ev.get("exc_type") == want
        elif key == "exc_type_contains":
            ok = want in (ev.get("exc_type") or "")
        elif key == "cause":
            ok = ev.get("cause") == want
        elif key == "rank":
            ok = want in (ev.get("ranks") or ())
        elif key == "message_contains":
            ok = all(part in alert.message for part in want)
        elif key == "lines":
            line = _line(alert)
            ok = line is not None and want[0] <= line <= want[1]
        else:
            raise AssertionError(f"unknown match key {key!r} in LABELS.json")
        if not ok:
            return False
    return True


def _summary(alerts: list[Alert]) -> list[str]:
    return [
        f"{a.detector}/{a.state}/{a.severity}/{a.kind} {a.source} {a.evidence.get('exc_type')} "
        f"ranks={a.evidence.get('ranks')}: {a.message[:100]}"
        for a in alerts
    ]


def check_alerts(name: str, check: dict[str, Any]) -> None:
    state = check.get("state", "firing")
    alerts = [a for a in _alerts(name) if a.state == state]
    hits = [a for a in alerts if matches(a, check["match"])]
    if "count" in check:
        assert len(hits) == check["count"], (check, _summary(alerts))
    else:
        assert len(hits) >= check["at_least"], (check, _summary(alerts))


def check_progress(name: str, check: dict[str, Any]) -> None:
    rated = [(p, rate) for p in _progress(name) for rate, unit in [rate_of(p)] if rate is not None and unit == check["unit"]]
    assert len(rated) >= check["at_least"], (check, len(rated), len(_progress(name)))
    if "median" in check:
        (lo_step, hi_step), (lo, hi) = check["median"]
        window = [rate for p, rate in rated if p.step is not None and lo_step <= p.step <= hi_step]
        assert window, (check, "no rated progress in the step window")
        assert lo <= statistics.median(window) <= hi, (check, statistics.median(window))


CASES = [
    pytest.param(
        name,
        check_id,
        id=f"{name}-{check_id}",
        marks=[pytest.mark.xfail(strict=True, reason=XFAIL[(name, check_id)])] if (name, check_id) in XFAIL else [],
    )
    for name in sorted(LABELS)
    for check_id in LABELS[name]["checks"]
]


@pytest.mark.parametrize("name, check_id", CASES)
def test_realrun_label(name: str, check_id: str) -> None:
    check = LABELS[name]["checks"][check_id]
    {"alerts": check_alerts, "progress": check_progress}[check["kind"]](name, check)


def test_every_fixture_has_labels_and_every_xfail_names_a_check() -> None:
    logs = {p.stem for p in FIXTURES.glob("*.log")}
    assert logs == set(LABELS), logs ^ set(LABELS)
    for name, check_id in XFAIL:
        assert check_id in LABELS[name]["checks"], (name, check_id)
    for name, label in LABELS.items():
        assert label["made_by"] and label["checks"], name
        assert (FIXTURES / f"{name}.log").stat().st_size < 200_000, name


def test_matcher_refuses_what_it_should() -> None:
    """The label matcher itself: each key can say no (else every count-0
    label would pass vacuously)."""
    a = Alert(time=0.0, detector="crash", state="firing", severity="critical", message="RuntimeError on rank 1: x",
              source="t.log:61", kind="exception", evidence={"exc_type": "RuntimeError", "ranks": [1], "cause": None})
    assert matches(a, {"detector": "crash", "kind": "exception", "exc_type": "RuntimeError", "rank": 1, "lines": [54, 61]})
    for bad in ({"detector": "stall"}, {"severity": "warning"}, {"kind": "killed"}, {"exc_type": "Runtime"},
                {"exc_type_contains": "Index"}, {"cause": "child_failed"}, {"rank": 0}, {"message_contains": ["x", "y"]},
                {"lines": [62, 70]}):
        assert not matches(a, bad), bad


@pytest.mark.parametrize("name", sorted(LABELS))
def test_replays_through_the_cli_as_contract_json(name: str) -> None:
    path = FIXTURES / f"{name}.log"
    out = subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", "replay", "--json", str(path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines():
        alert = json.loads(line)
        assert alert["state"] in ("firing", "resolved") and alert["severity"] in ("info", "warning", "critical")
        assert alert["detector"] in (
            "memory_volatility", "memory_growth", "memory_pressure", "throughput_drop", "stall", "fx_tracing",
            "crash", "recompile", "padding", "process_exit",
        )


# Checks a live rerun cannot be held to: the outcome depends on timing, and
# both outcomes are fixtures of their own.
TIMING_DEPENDENT: dict[tuple[str, str], str] = {
    ("hf_trainer_crash", "one_critical_crash"): "the last tqdm redraw before the traceback may show a lower count "
    "than tqdm's redraw at exit (hf_trainer_crash_exit_redraw)",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, needs",
    [
        pytest.param("host_oom", ("numpy", "torch"), id="host_oom"),
        pytest.param("caught_traceback_survives", ("torch",), id="caught_traceback_survives"),
        pytest.param("hf_trainer_crash", ("torch", "transformers"), id="hf_trainer_crash"),
    ],
)
def test_a_fresh_run_still_meets_its_labels(name: str, needs: tuple[str, ...], tmp_path: Path) -> None:
    """The scripts are the fixtures' source of truth: rerun one live (its
    ``made_by`` command, into a temporary folder) and hold the new log to the
    same labels, so a torch/transformers upgrade that changes the output
    shows up here first."""
    for module in needs:
        pytest.importorskip(module, reason=f"the script needs {module} (pip install {module})")
    log = tmp_path / f"{name}.log"
    command = LABELS[name]["made_by"].replace(f"> {name}.log", f"> {log}")
    assert command.startswith("python ") and str(log) in command, command
    subprocess.run(f"{sys.executable}{command[len('python'):]}", shell=True, cwd=ROOT, timeout=300)
    monitor = Monitor(detector_config=_config(LABELS[name].get("config", {})), keep_lines=0)
    alerts = replay([str(log)], monitor=monitor).alerts
    for check_id, check in LABELS[name]["checks"].items():
        if check["kind"] != "alerts" or (name, check_id) in XFAIL or (name, check_id) in TIMING_DEPENDENT:
            continue
        firing = [a for a in alerts if a.state == check.get("state", "firing")]
        hits = [a for a in firing if matches(a, check["match"])]
        want = check.get("count", check.get("at_least"))
        assert (len(hits) == want) if "count" in check else (len(hits) >= want), (check_id, _summary(firing))


def test_a_real_hf_log_without_stamps_replays_within_its_run(tmp_path: Path) -> None:
    """The real HF Trainer run's stdout (tqdm bar, dict lines, no stamp):
    its bar ran 30 s and the file was last written when it ended, so replay
    dates it in the 30 s before the file's mtime, not the 30 s after it
    (its alerts came after the run ended; the baseline's window missed the
    probe lines written beside it)."""
    import os
    import shutil

    from dflash_watch.log_batches import log_events

    log = tmp_path / "hf_trainer_slowdown.log"
    shutil.copyfile(Path(__file__).resolve().parents[1] / "fixtures" / "realruns" / log.name, log)
    end = 1_796_400_000.0
    os.utime(log, (end, end))
    times = [e.time for e in log_events(str(log))]
    assert min(times) == pytest.approx(end - 30.0, abs=0.5) and max(times) == pytest.approx(end, abs=0.5)
