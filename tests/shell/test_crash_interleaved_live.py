"""A crash another rank wrote into, from real processes and the real tailer.

- ``interleave.py`` (tests/fixtures/crash_interleaved/) run afresh: two real
  processes, one O_APPEND file, the interpreter's own traceback printer
  (PYTHONUNBUFFERED unset; the unbuffered shapes run the raising rank with
  ``python -u`` as CI images and launch scripts do). Each shape lands in the
  log as it did in the captured fixture, and replay recovers the crash.
- ``dflash-watch replay --json`` on the captured torchrun crash loop: two
  alerts, the second one's exception line garbled.
- The live path, through the real tailer threads of ``LiveSession``, reads
  each fixture (whole, and appended in bursts cut anywhere) to the same
  crashes as replay, with the same recovered type, message and evidence.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_watch.replay import replay
from tests.shell.live_read import read_live

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "crash_interleaved"
SCRIPT = HERE / "interleave.py"
TYPE, SAID = "RuntimeError", "bad config: drafter has 4 layers, checkpoint has 5"
GARBLED = "garbled exception line"
TORCHRUN = "torchrun_max_restarts_garbled_exception_line.log"
# shape -> the exception line as it lands in the log, and what the alert says.
SHAPES = {
    "unbuffered-glued": (f"{TYPE}attempt 1 rank 0: {SAID}", (TYPE, SAID)),
    "unbuffered-split": (f"{TYPE}attempt 1 rank 0", (TYPE, SAID)),
    "buffered-glued": (f"attempt 1 rank 0{TYPE}: {SAID}", (TYPE, SAID)),
    "buffered-line": (f"{TYPE}: {SAID}", (TYPE, SAID)),
    "unbuffered-glued-lookup": ("KeyErrorattempt 1 rank 0: 'num_layers'",
                                (GARBLED, "KeyErrorattempt 1 rank 0: 'num_layers'")),
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users do not set it
    return env


def _no_path(line: str) -> str:
    return re.sub(r'File "[^"]*/', 'File "', line)


def _said(alert) -> tuple:  # noqa: ANN001
    ev = alert.evidence
    return (alert.detector, alert.kind, alert.source.rsplit(":", 1)[1], ev["exc_type"], ev["message"],
            ev.get("garbled"), [c["source"].rsplit(":", 1)[1] for c in ev["collateral"]])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_real_processes_interleave_and_the_crash_is_recovered(shape: str, tmp_path: Path) -> None:
    if shape.startswith("unbuffered") and sys.version_info[:2] != (3, 11):
        pytest.skip("the unbuffered shapes are the writes of Python 3.11's traceback printer")
    log = tmp_path / "train.log"
    done = subprocess.run([sys.executable, str(SCRIPT), shape, str(log)], env=_env(), timeout=60,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = log.read_text(encoding="utf-8").splitlines()
    line, (exc_type, message) = SHAPES[shape]
    assert line in lines, lines  # the shape is made, not left to chance
    alerts = [a for a in replay([str(log)]).alerts if a.detector == "crash"]
    assert [(a.kind, a.severity, a.evidence["exc_type"], a.evidence["message"]) for a in alerts] == [
        ("exception", "critical", exc_type, message)]
    assert lines[int(alerts[0].source.rsplit(":", 1)[1]) - 1] == line
    # The captured fixture is this same run (but where the checkout lies).
    fixture = (HERE / f"{shape.replace('-', '_')}_python3.11.log").read_text(encoding="utf-8").splitlines()
    assert [_no_path(x) for x in fixture] == [_no_path(x) for x in lines]


def test_replay_json_reports_both_crashes_of_the_loop() -> None:
    done = subprocess.run([sys.executable, "-m", "dflash_watch", "replay", "--json", "--tz", "UTC",
                           str(HERE / TORCHRUN)], env=_env(), timeout=120, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    alerts = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(a["detector"], a["kind"], a["source"]) for a in alerts] == [
        ("crash", "exception", f"{TORCHRUN}:6"), ("crash", "exception", f"{TORCHRUN}:13")]
    assert all(a["message"].startswith(f"{TYPE}: {SAID}") for a in alerts)
    assert alerts[1]["evidence"]["garbled"] == f"{TYPE}attempt 1 rank 0: {SAID}"


def _live(log: Path, target: Path, *, bursts: bool) -> list:
    # Small bursts: they end inside the garbled lines.
    return read_live(log, target, bursts=bursts, seed=len(log.name), burst_bytes=(16, 256), pause_s=0.01)


@pytest.mark.parametrize("name", sorted(p.name for p in HERE.glob("*.log")))
def test_the_real_tailer_reads_the_same_crashes_as_replay(name: str, tmp_path: Path) -> None:
    log = HERE / name
    expected = [_said(a) for a in replay([str(log)]).alerts if a.detector == "crash"]
    assert expected and all(said[3] in (TYPE, GARBLED) for said in expected)
    for bursts in (False, True):
        got = _live(log, tmp_path / f"{bursts}.log", bursts=bursts)
        assert [_said(a) for a in got if a.detector == "crash"] == expected, f"bursts={bursts}"
