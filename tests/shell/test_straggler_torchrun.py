"""straggler with real torchrun on CPU: 3 ranks on gloo, a slow rank and a hung one.

The job (``JOB``) is an ordinary DDP-shaped loop: each rank computes (a
sleep: deterministic on a shared 2-core machine, where matmuls of three
processes would be noise), then joins an ``all_reduce``; it logs a step
line (``torchrun --tee 3`` puts ``[defaultN]:`` in front) and writes probe
lines with ``dflash_watch.probe`` (step, compute and wait seconds), and a
watchdog thread logs "no step for N s (last step K), waiting in
all_reduce" while the rank waits in a collective. ``slow``: rank 1's
compute doubles from a set step. ``hang``: rank 2 sleeps before an
all_reduce; the others block in it until the gloo timeout ends the job.

Both runs are watched LIVE by a real ``dflash-watch headless`` and then
replayed. The small recorded logs in tests/fixtures/straggler/
are replayed by the fast test at the end (no torch needed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from headless_helpers import alert_lines, wait_for_notice

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "straggler"

JOB = textwrap.dedent(
    """
    import datetime, logging, os, sys, threading, time
    import torch
    import torch.distributed as dist
    from dflash_watch.probe import Probe

    logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO, stream=sys.stderr)
    log = logging.getLogger("train")
    mode, out = sys.argv[1], sys.argv[2]
    steps, special = int(sys.argv[3]), int(sys.argv[4])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(sys.argv[5])))
    rank = dist.get_rank()
    probe = Probe(os.path.join(out, f"dflash-probe-rank{rank}.jsonl"), rank=rank, every_steps=1)
    where = {"in": None, "step": -1, "at": time.time()}

    def watchdog():
        while True:
            time.sleep(1.0)
            quiet = time.time() - where["at"]
            if quiet >= 2.0:
                wait = f", waiting in {where['in']}" if where["in"] else ""
                log.info("no step for %d s (last step %d)%s", quiet, where["step"], wait)

    threading.Thread(target=watchdog, daemon=True).start()
    grad = torch.ones(1024)
    for step in range(steps):
        began = time.perf_counter()
        compute = 0.1
        if mode == "slow" and rank == 1 and step >= special:
            if step == special:
                with open(os.path.join(out, "slow_start.txt"), "w") as f:
                    f.write(repr(time.time()))
            compute = 0.2
        if mode == "hang" and rank == 2 and step == special:
            with open(os.path.join(out, "hang_start.txt"), "w") as f:
                f.write(repr(time.time()))
            time.sleep(3600)  # hangs before the all_reduce; the others block in it
        time.sleep(compute)
        computed = time.perf_counter()
        where["in"] = "all_reduce"
        dist.all_reduce(grad)
        where["in"] = None
        done = time.perf_counter()
        where["step"], where["at"] = step, time.time()
        loss = 1.0 / (1 + step)
        log.info("step %d | loss %.4f | step_time %.3fs", step, loss, done - began)
        probe.step(step=step, loss=loss, step_seconds=done - began, compute_seconds=computed - began,
                   wait_seconds=done - computed)
    probe.close()
    dist.destroy_process_group()
    """
)
# Detector thresholds for runs of seconds instead of hours (CONTRACTS: [detectors]).
CONFIG = textwrap.dedent(
    """
    [detectors]
    straggler_window_s = 4.0
    straggler_min_samples = 5
    straggler_warmup_s = 1.0
    straggler_slow_for_s = 3.0
    straggler_hung_min_s = 5.0
    stall_min_s = 1000000.0
    stall_first_s = 1000000.0
    """
)
SLOW_STEPS, SLOW_FROM = 110, 30
HANG_STEPS, HANG_AT, HANG_TIMEOUT = 1000, 25, 20


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users' runs are not unbuffered
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _torchrun(tmp: Path, mode: str, steps: int, special: int, timeout_s: float) -> subprocess.Popen[bytes]:
    script = tmp / "job.py"
    script.write_text(JOB, encoding="utf-8")
    out = (tmp / "train.log").open("ab")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3", "--tee", "3",
           "--log-dir", str(tmp / "torchrun"), str(script), mode, str(tmp), str(steps), str(special), str(timeout_s)]
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=tmp, env=_env())


def _replay(tmp: Path) -> list:
    from dflash_watch.commands.common import detector_config_from
    from dflash_watch.config import load_config
    from dflash_watch.monitor import Monitor
    from dflash_watch.replay import replay

    (tmp / "watch.toml").write_text(CONFIG)
    config = detector_config_from(load_config(tmp / "watch.toml").detectors)
    monitor = Monitor(detector_config=config, keep_lines=0)
    probes = sorted(str(p) for p in tmp.glob("dflash-probe-rank*.jsonl"))
    return replay([str(tmp / "train.log")], probes=probes, monitor=monitor).alerts


def _stragglers(alerts: list) -> list[tuple[str, str | None, int | None]]:
    return [(a.state, a.kind, a.rank) for a in alerts if a.detector == "straggler"]


def _headless(tmp: Path) -> subprocess.Popen[str]:
    (tmp / "watch.toml").write_text(CONFIG)
    return subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--config", str(tmp / "watch.toml"),
         "--log", str(tmp / "train.log")],
        cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.terminate()
    try:
        out = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()
    return out[1] if isinstance(out[1], str) else ""


@pytest.mark.slow
def test_slow_rank_named_live_under_headless_and_in_replay(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="needs torch (pip install torch): a real torchrun on gloo")
    headless = _headless(tmp_path)
    job = None
    err = ""
    try:
        err = wait_for_notice(headless, "to appear")
        job = _torchrun(tmp_path, "slow", SLOW_STEPS, SLOW_FROM, 60)
        alerts = alert_lines(headless, 90,
                              stop=lambda a: a["detector"] == "straggler" and a["state"] == "firing")
        assert job.wait(timeout=120) == 0, (tmp_path / "train.log").read_text()[-3000:]
    finally:
        if job is not None and job.poll() is None:
            job.kill()
        err += _stop(headless)
    slow = [a for a in alerts if a["detector"] == "straggler"]
    assert [(a["state"], a["kind"], a["rank"]) for a in slow] == [("firing", "slow", 1)], (alerts, err[-2000:])
    started = float((tmp_path / "slow_start.txt").read_text())
    live_s = slow[0]["_seen"] - started
    print(f"live: straggler rank 1 named {live_s:.1f} s after its compute doubled (alert time "
          f"{slow[0]['time'] - started:+.1f} s)")
    assert "rank 1 is a straggler" in slow[0]["message"], slow[0]
    assert live_s < 20.0
    # Replay of the same files: the same alert, on the data's own clock.
    replayed = _replay(tmp_path)
    assert _stragglers(replayed) == [("firing", "slow", 1)]
    firing = next(a for a in replayed if a.detector == "straggler")
    print(f"replay: named {firing.time - started:.1f} s (data time) after the slowness began")
    assert 0 < firing.time - started < 15.0
    assert not [a for a in replayed if a.detector == "crash"]


@pytest.mark.slow
def test_hung_rank_named_live_under_headless_and_in_replay(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="needs torch (pip install torch): a real torchrun on gloo")
    headless = _headless(tmp_path)
    job = None
    err = ""
    try:
        err = wait_for_notice(headless, "to appear")
        job = _torchrun(tmp_path, "hang", HANG_STEPS, HANG_AT, HANG_TIMEOUT)
        alerts = alert_lines(headless, 90,
                              stop=lambda a: a["detector"] == "straggler" and a["state"] == "firing")
        code = job.wait(timeout=120)  # the gloo timeout ends the others; torchrun ends the hung one
    finally:
        if job is not None and job.poll() is None:
            job.kill()
            job.wait()
        err += _stop(headless)
    assert code != 0
    live = [a for a in alerts if a["detector"] == "straggler"]
    assert [(a["state"], a["kind"], a["rank"]) for a in live] == [("firing", "hung", 2)], (alerts, err[-2000:])
    started = float((tmp_path / "hang_start.txt").read_text())
    print(f"live: hung rank 2 named {live[0]['_seen'] - started:.1f} s after it stopped: {live[0]['message']}")
    assert "ranks 0, 1 wait in all_reduce" in live[0]["message"]
    assert live[0]["_seen"] - started < HANG_TIMEOUT  # before the collective timeout says anything
    alerts = _replay(tmp_path)
    hung = [a for a in alerts if a.detector == "straggler"]
    assert [(a.state, a.kind, a.rank) for a in hung][:1] == [("firing", "hung", 2)], _stragglers(alerts)
    assert "all_reduce" in hung[0].message, hung[0].message
    print(f"replay: hung rank 2 named {hung[0].time - started:.1f} s (data time) after it stopped; "
          f"{hung[0].message}")
    assert not [a for a in alerts if a.detector == "straggler" and a.kind == "slow"]


@pytest.mark.parametrize("case", ["slow", "hang"])
def test_recorded_torchrun_logs_replay(case: str, tmp_path: Path) -> None:
    """The recorded runs (tests/fixtures/straggler/<case>/): the same verdict, fast."""
    src = FIXTURES / case
    for f in src.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    alerts = _replay(tmp_path)
    expected = ("slow", 1) if case == "slow" else ("hung", 2)
    assert _stragglers(alerts)[:1] == [("firing", *expected)]
    assert len([a for a in alerts if a.detector == "straggler" and a.state == "firing"]) == 1


def test_torchrun_redirect_files_are_told_apart_by_their_local_rank_folder(tmp_path: Path) -> None:
    """``torchrun --redirects 3 --log-dir D`` writes every rank to
    ``D/<run>/attempt_0/<local rank>/stdout.log``: the same name for all,
    the rank in the folder. The recorded slow run, split that way."""
    from dflash_watch.replay import replay

    per_rank: dict[str, list[str]] = {}
    for line in (FIXTURES / "slow" / "train.log").read_text().splitlines(keepends=True):
        if line.startswith("[default"):
            rank, _, text = line[len("[default"):].partition("]:")
            per_rank.setdefault(rank, []).append(text)
    attempt = tmp_path / "logs" / "run1" / "attempt_0"
    for rank, lines in per_rank.items():
        (attempt / rank).mkdir(parents=True)
        (attempt / rank / "stdout.log").write_text("".join(lines))
    result = replay(sorted(str(p) for p in attempt.glob("*/stdout.log")))
    rows = result.monitor.detectors.rank_table()
    assert [r.rank for r in rows] == [0, 1, 2]
    assert all(r.last_step == 109 for r in rows)
    assert {a.source.split(":")[0] for a in result.alerts} <= {"0/stdout.log", "1/stdout.log", "2/stdout.log"}
