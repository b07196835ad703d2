"""A job stopped from outside, and a collective that timed out: real torchrun.

- SIGTERM to torchrun (a person, ``kill``, a scheduler): its agent raises
  ``SignalException: Process N got signal: 15`` and stops the ranks. That is
  ``crash`` kind ``killed``, never a crash of the code (CONTRACTS section 4).
- ``--max-restarts 1`` and a rank that fails the same way in both worker
  groups: two incidents, not one (a crash loop).
- gloo with ``timeout=2 s``, rank 1 sleeping instead of joining: rank 0's
  all_reduce (or monitored_barrier) times out. That is ``nccl_timeout`` (any
  backend's collective timeout) naming rank 0, the one that waited, and
  hinting at rank 1, the one that never joined.

Run this file as a script to refresh the fixtures under
tests/fixtures/tracebacks/ (named with the torch version) that the core tests
(tests/core/test_crash_kinds_real.py) read without torch.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed; real torchrun output needs it")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"

# Every rank steps in lockstep (an all_reduce per step) until stopped.
LOOP = textwrap.dedent("""\
    import time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.ones(4)
    for step in range(1, 100000):
        dist.all_reduce(x)
        print(f"step {step} | loss 2.0 | rank {rank}", flush=True)
        time.sleep(0.3)
""")

# Rank 1 never reaches the second collective; rank 0 times out after 2 s.
GLOO_TIMEOUT = textwrap.dedent("""\
    import datetime, time, torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))
    rank = dist.get_rank()
    x = torch.ones(4)
    dist.all_reduce(x)
    print(f"step 1 | loss 2.0 | rank {rank}", flush=True)
    if rank == 1:
        time.sleep(30)
    dist.all_reduce(x)
""")

# The same with monitored_barrier, which names the rank that did not pass.
MONITORED_BARRIER = GLOO_TIMEOUT.rsplit("dist.all_reduce(x)", 1)[0] + (
    "dist.monitored_barrier(timeout=datetime.timedelta(seconds=2))\n"
)

# torchrun --max-restarts 1: rank 1 fails the same way in both worker groups,
# before any step (a start-up crash loop: no progress between the two).
# (No process group: a restarted gloo group may fail to connect on a busy
# host, a crash of another kind.)
RESTARTED = textwrap.dedent("""\
    import os, time
    rank = int(os.environ["RANK"])
    print(f"attempt {os.environ['TORCHELASTIC_RESTART_COUNT']} rank {rank}", flush=True)
    if rank == 1:
        time.sleep(1.0)  # rank 0's line first: two processes writing one file interleave mid-line
        raise RuntimeError("bad config: drafter has 4 layers, checkpoint has 5")
    time.sleep(60)
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users do not set it
    return env


def _torchrun(script: Path, nproc: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *args,
            str(script)]


def run_torchrun(source: str, tmp: Path, *args: str) -> tuple[int, str]:
    """torchrun on CPU, 2 ranks; stdout and stderr in one file, as a tee'd log has them."""
    script = tmp / "job.py"
    script.write_text(source, encoding="utf-8")
    log = tmp / "train.log"
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(_torchrun(script, 2, *args), stdout=out, stderr=subprocess.STDOUT, timeout=120,
                              cwd=tmp, env=_env(), check=False).returncode
    return code, log.read_text(encoding="utf-8")


def start_loop(tmp: Path) -> tuple[subprocess.Popen[bytes], Path]:
    script = tmp / "job.py"
    script.write_text(LOOP, encoding="utf-8")
    log = tmp / "train.log"
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(_torchrun(script, 2), stdout=out, stderr=subprocess.STDOUT, cwd=tmp, env=_env())
    return proc, log


def wait_for(log: Path, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, f"{text!r} never reached the log:\n{log.read_text()[-2000:]}"
        time.sleep(0.1)


def sigterm_torchrun(tmp: Path) -> tuple[int, str]:
    """Both ranks step, then someone sends SIGTERM to torchrun (not to the ranks)."""
    proc, log = start_loop(tmp)
    try:
        wait_for(log, "step 2 | loss 2.0 | rank 1")
        wait_for(log, "step 2 | loss 2.0 | rank 0")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, log.read_text(encoding="utf-8")


def crash_alerts(path: Path) -> list:
    from dflash_watch.replay import replay

    return [a for a in replay([str(path)]).alerts if a.detector in ("crash", "fx_tracing")]


@pytest.mark.slow
def test_sigterm_to_torchrun_is_killed_not_a_crash_of_the_code(tmp_path: Path) -> None:
    code, text = sigterm_torchrun(tmp_path)
    assert "SignalException: Process" in text and "got signal: 15" in text, text[-3000:]
    (alert,) = crash_alerts(tmp_path / "train.log")
    assert (alert.kind, alert.evidence["cause"], alert.severity) == ("killed", "sigterm", "critical")
    assert alert.message.startswith("training killed from outside (sigterm)")


def test_sigterm_to_torchrun_live_is_one_killed_alert(tmp_path: Path) -> None:
    """A real `headless` follows the log while torchrun runs; SIGTERM to torchrun."""
    proc, log = start_loop(tmp_path)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
    )
    try:
        wait_for(log, "step 2 | loss 2.0 | rank 1")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        assert watcher.stdout is not None
        ready, _, _ = select.select([watcher.stdout], [], [], 10.0)
        line = watcher.stdout.readline() if ready else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        watcher.send_signal(signal.SIGTERM)
        rest, err = watcher.communicate(timeout=15)
    assert line, f"no alert while headless ran; stderr: {err[-2000:]}"
    crashes = [a for a in map(json.loads, [line, *rest.splitlines()]) if a["detector"] == "crash"]
    assert [(a["kind"], a["evidence"]["cause"]) for a in crashes] == [("killed", "sigterm")]


@pytest.mark.slow
@pytest.mark.parametrize("source", [GLOO_TIMEOUT, MONITORED_BARRIER], ids=["all_reduce", "monitored_barrier"])
def test_a_real_gloo_timeout_is_nccl_timeout_naming_the_rank_that_waited(tmp_path: Path, source: str) -> None:
    code, text = run_torchrun(source, tmp_path)
    assert code == 1 and "Timed out waiting 2000ms for recv operation" in text, text[-3000:]
    (alert,) = crash_alerts(tmp_path / "train.log")
    assert (alert.kind, alert.severity, alert.evidence["rank"]) == ("nccl_timeout", "critical", 0)
    assert alert.message.startswith("collective timeout on rank 0: RuntimeError")
    assert alert.evidence["timed_out_ranks"] == [0] and alert.evidence["suspect_ranks"] == [1]
    assert "suspect rank 1" in alert.message


@pytest.mark.slow
def test_a_restarted_worker_group_that_crashes_again_is_a_second_alert(tmp_path: Path) -> None:
    """No progress between the two crashes: torch elastic's ``failed
    (exitcode: 1)`` line says the first group was gone before the second
    one printed its traceback."""
    code, text = run_torchrun(RESTARTED, tmp_path, "--max-restarts=1")
    assert code == 1 and "attempt 1 rank 1" in text and text.count("RuntimeError: bad config") == 2, text[-3000:]
    alerts = crash_alerts(tmp_path / "train.log")
    lines = text.splitlines()
    assert [lines[int(a.source.rsplit(":", 1)[1]) - 1] for a in alerts] == [
        "RuntimeError: bad config: drafter has 4 layers, checkpoint has 5"] * 2
    assert {a.kind for a in alerts} == {"exception"}


def refresh_fixtures() -> None:
    """Write the captured outputs as fixtures (run this file as a script)."""
    import tempfile

    version = torch.__version__.split("+")[0]
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _, text = sigterm_torchrun(Path(tmp))
    (FIXTURES / f"torchrun_sigterm_to_agent_torch{version}.txt").write_text(text, encoding="utf-8")
    for source, tag in ((GLOO_TIMEOUT, "torchrun_gloo_timeout_rank1_absent"),
                        (MONITORED_BARRIER, "torchrun_gloo_monitored_barrier_rank1_absent")):
        with tempfile.TemporaryDirectory() as tmp:
            _, text = run_torchrun(source, Path(tmp))
        (FIXTURES / f"{tag}_torch{version}.txt").write_text(text, encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        _, text = run_torchrun(RESTARTED, Path(tmp), "--max-restarts=1")
    (FIXTURES / f"torchrun_max_restarts_same_crash_twice_torch{version}.txt").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    refresh_fixtures()
