"""`headless` attached to a finished log with the GPUs sampled, as on a GPU box.

On a machine with GPUs, NVML sampling is on by default. A real run's log
(02_olora: a DeepSpeed run of 2025, stamped on its own clock) that ended
two hours ago is attached to: its crash alerts must come out while
headless runs, as replay has them, and the GPU samples it records
(``--record-gpu``) must sit on the log's clock, not on this machine's
(a sample taken before the log's first text was read put the watcher a
year ahead of the log, and no crash alert came). No machine here has a
GPU: the child process loads the fake driver of ``fake_nvml`` at start
(a ``sitecustomize`` on its path); everything else is the real command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from headless_helpers import alert_lines

from dflash_watch.replay import replay

SHELL = Path(__file__).resolve().parent
ROOT = SHELL.parents[1]
FIXTURE = "02_olora_llama2_deepspeed_cuda_oom.log"

SITECUSTOMIZE = f"""\
import sys
sys.path.insert(0, {str(SHELL)!r})
import fake_nvml


class _Patch:
    @staticmethod
    def setattr(obj, name, value):
        setattr(obj, name, value)


fake_nvml.FakeNvml.eight().install(_Patch())
"""


@pytest.mark.slow
def test_headless_on_a_finished_log_with_the_gpus_sampled(tmp_path: Path) -> None:
    from live_read import fixture_logs

    (fixture,) = [p for p in fixture_logs() if p.name == FIXTURE]
    log = tmp_path / FIXTURE
    log.write_bytes(fixture.read_bytes())
    os.utime(log, (time.time() - 7200, time.time() - 7200))
    replayed = replay([str(log)])
    expected = sorted(a.kind for a in replayed.alerts if a.detector == "crash" and a.state == "firing")
    last = replayed.monitor.now
    assert expected and last is not None
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    record = tmp_path / "gpu.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--log", str(log), "--record-gpu", str(record)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )
    crashes: list[dict] = []

    def enough(alert: dict) -> bool:
        if alert["detector"] == "crash" and alert["state"] == "firing":
            crashes.append(alert)
        return len(crashes) >= len(expected)

    try:
        time.sleep(3.0)  # a few samples taken, the first before the log is read
        alert_lines(proc, 20.0, stop=enough)
        time.sleep(1.5)  # samples after the catch-up, on the log's clock
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert sorted(a["kind"] for a in crashes) == expected, err[-2000:]
    samples = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert len({s["gpu"] for s in samples}) == 8, err[-2000:]
    # On the log's clock (2025, run on by its 2 hours of silence), not on
    # this machine's: every sample, the ones taken before the log was read too.
    times = [s["time"] for s in samples]
    assert max(times) <= last + 7200 + 600, (max(times) - last)
    assert min(times) >= last - 600, (min(times) - last)
