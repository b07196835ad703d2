"""Real runs, live: `dflash-watch start` runs a real training job in tmux,
`dflash-watch headless` watches its log and the job, as a user would set it up.

The jobs are the corpus scripts (scripts/realruns): an HF Trainer run whose
model raises mid-training, and a torchrun DDP job of 2 ranks on gloo where
rank 1 dies (its sibling then fails under it and torchrun stops it). Each must
give, on headless's stdout while the job is dying:

* one critical crash alert whose message is the root cause (not the
  sibling's "Connection closed by peer", not a second alert per rank), and
* the job's exit (`process_exit`), which names that crash.

Needs tmux, torch (and transformers for the HF case); skipped with a reason
where they are missing. Every tmux server is private (``-L``) and killed.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dflash_watch.control.tmux import Tmux

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "realruns"
PY = shlex.quote(sys.executable)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Tmux().available, reason="tmux not installed")]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dflash_watch.cli", *args]


def _watch_job(tmp_path: Path, socket: str, command: str, timeout: float) -> list[dict]:
    """Start ``command`` with `dflash-watch start`, watch it with headless until
    the job's exit alert has come (or ``timeout``), then SIGTERM headless."""
    log = tmp_path / "train.log"
    log.touch()
    job = ["--session", "train", "--socket", socket, "--cwd", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("PYTHONUNBUFFERED", None)  # users' runs are not unbuffered: the job's output is block-buffered
    headless = subprocess.Popen(
        _cli("headless", "--no-gpu", "--log", str(log), *job, "--cmd", command),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    alerts: list[dict] = []
    try:
        started = subprocess.run(_cli("start", *job, "--cmd", command), cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=60)
        assert started.returncode == 0, started.stderr
        assert headless.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not any(a["detector"] == "process_exit" for a in alerts):
            ready, _, _ = select.select([headless.stdout], [], [], 1.0)
            if ready:
                line = headless.stdout.readline()
                if line:
                    alerts.append(json.loads(line))
    finally:
        headless.send_signal(signal.SIGTERM)
        out, err = headless.communicate(timeout=20)
    assert headless.returncode == 0, err
    alerts += [json.loads(line) for line in out.splitlines() if line.strip()]
    assert any(a["detector"] == "process_exit" for a in alerts), (
        f"no exit alert within {timeout} s; alerts: {[(a['detector'], a['kind']) for a in alerts]}; "
        f"log tail: {log.read_text()[-2000:]}"
    )
    return alerts


def _crashes(alerts: list[dict]) -> list[dict]:
    return [a for a in alerts if a["detector"] in ("crash", "fx_tracing") and a["severity"] == "critical"]


def test_hf_trainer_crash_live(tmp_path: Path, tmux_socket: str) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    command = f"{PY} {SCRIPTS / 'hf_trainer_crash.py'} > train.log 2>&1"
    alerts = _watch_job(tmp_path, tmux_socket, command, timeout=240)
    crashes = _crashes(alerts)
    assert len(crashes) == 1, [(a["detector"], a["kind"], a["message"][:80]) for a in alerts]
    assert crashes[0]["evidence"]["exc_type"] == "IndexError"
    exit_alert = next(a for a in alerts if a["detector"] == "process_exit")
    assert exit_alert["kind"] == "crash"
    assert "IndexError" in exit_alert["message"], exit_alert["message"]


def test_torchrun_rank_dies_live(tmp_path: Path, tmux_socket: str) -> None:
    pytest.importorskip("torch")
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun not beside this Python")
    command = f"{shlex.quote(str(torchrun))} --nproc_per_node=2 {SCRIPTS / 'ddp_rank_dies.py'} > train.log 2>&1"
    alerts = _watch_job(tmp_path, tmux_socket, command, timeout=240)
    crashes = _crashes(alerts)
    assert len(crashes) == 1, [(a["detector"], a["kind"], a["message"][:100]) for a in alerts]
    root = crashes[0]
    assert "rank 1" in root["message"] and "bad shard file" in root["message"], root["message"]
    assert not [a for a in alerts if a["kind"] == "killed"], "torchrun's own SIGTERM to the sibling is not a kill"
    exit_alert = next(a for a in alerts if a["detector"] == "process_exit")
    assert "RuntimeError" in exit_alert["message"] and "rank 1" in exit_alert["message"], exit_alert["message"]


def test_torchrun_buffered_steps_after_the_traceback_are_one_crash_live(tmp_path: Path, tmux_socket: str) -> None:
    """Step lines print()ed, stdout block-buffered (``--print``): rank 0's
    traceback reaches the log first, its steps at its exit, then elastic's
    report. One critical crash, not a second one for the report."""
    pytest.importorskip("torch")
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun not beside this Python")
    command = (f"{shlex.quote(str(torchrun))} --nproc_per_node=2 --tee 3 {SCRIPTS / 'ddp_rank_dies.py'} "
               "--print --die-rank 0 > train.log 2>&1")
    alerts = _watch_job(tmp_path, tmux_socket, command, timeout=240)
    text = (tmp_path / "train.log").read_text()
    assert text.index("Traceback") < text.index("step 1/40") < text.index("ChildFailedError"), "not buffered"
    crashes = _crashes(alerts)
    assert len(crashes) == 1, [(a["detector"], a["kind"], a["message"][:100]) for a in alerts]
    assert "rank 0" in crashes[0]["message"] and "bad shard file" in crashes[0]["message"], crashes[0]["message"]


def test_tee_pipeline_reports_the_trainers_exit_live(tmp_path: Path, tmux_socket: str) -> None:
    """`python train.py 2>&1 | tee train.log`: the exit is the trainer's (1), not tee's (0)."""
    pytest.importorskip("torch")
    command = f"{PY} {SCRIPTS / 'tee_script_crash.py'} 2>&1 | tee train.log"
    alerts = _watch_job(tmp_path, tmux_socket, command, timeout=180)
    exit_alert = next(a for a in alerts if a["detector"] == "process_exit")
    assert exit_alert["kind"] == "crash" and exit_alert["evidence"].get("code") == 1, exit_alert
    assert [a["evidence"]["exc_type"] for a in _crashes(alerts)] == ["AssertionError"]
