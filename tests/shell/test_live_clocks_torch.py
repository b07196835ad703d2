"""A real torch training loop whose log clock is ten minutes off the wall clock.

`test_live_clocks` proves the rule with a plain writer; this is the same
rule under a real framework run: torch imported (seconds of silence before
the first line), a real model, optimizer and backward pass, Python logging
whose ``Formatter.converter`` is shifted by -10 min (a host clock that
drifted), stdout redirected to the log with PYTHONUNBUFFERED unset, and a
real torch error raised uncaught at the end. `headless` is started before
the log exists. No stall may fire on the skewed stamps; the crash alerts
within a few seconds of the log going quiet.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from headless_helpers import wait_for_notice
from test_live_clocks import _alerts

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="torch is not installed; a real torch training loop needs it"),
]

TRAIN = textwrap.dedent("""\
    import logging, sys, time
    import torch

    OFFSET_S = -600.0  # this host's clock is ten minutes behind
    fmt = logging.Formatter("%(asctime)s - %(levelname)s - %(name)s - %(message)s")
    fmt.converter = lambda t: time.localtime(t + OFFSET_S)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(fmt)
    log = logging.getLogger("train")
    log.addHandler(handler)
    log.setLevel(logging.INFO)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch, seq = 8, 32
    steps = int(sys.argv[1])
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        x = torch.randn(batch * seq, 64)
        loss = torch.nn.functional.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.1)  # the data loader
        tok_s = batch * seq / (time.perf_counter() - t0)
        log.info("step %d/%d | loss %.4f | %.0f tok/s", step, 1000, loss.item(), tok_s)
    # A real torch error, uncaught: its traceback ends the log.
    model(torch.randn(batch, 65))
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users' runs are not unbuffered
    return env


def test_a_real_torch_loop_ten_minutes_behind_has_no_stall_and_its_crash_alerts_at_once(tmp_path: Path) -> None:
    log, script = tmp_path / "train.log", tmp_path / "train.py"
    script.write_text(TRAIN, encoding="utf-8")
    # A short stall limit (as the buffered-log tests use), so that steps
    # dated 10 min off the live clock would fire it; the first step may come
    # late (torch's import is silence too).
    config = tmp_path / "dflash-watch.toml"
    config.write_text("[detectors]\nstall_min_s = 3.0\nstall_factor = 5.0\nstall_first_s = 60.0\n")
    headless = subprocess.Popen([sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log),
                                 "--config", str(config)],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env())
    err = ""
    try:
        err = wait_for_notice(headless, "to appear")  # started first: the log does not exist yet
        with open(log, "ab") as out:
            train = subprocess.Popen([sys.executable, str(script), "40"], stdout=out, stderr=subprocess.STDOUT,
                                     env=_env(), cwd=tmp_path)
        train.wait(timeout=180)
        ended = time.monotonic()  # the traceback is the last thing written
        wall_ended = time.time()
        alerts = _alerts(headless, ended + 8.0, stop=lambda a: a["detector"] == "crash")
    finally:
        if headless.poll() is None:
            headless.terminate()
        rest, tail = headless.communicate(timeout=20)
        err += tail
    text = log.read_text(encoding="utf-8")
    assert train.returncode == 1 and "step 40/1000" in text and "RuntimeError" in text, text[-2000:]
    crashes = [a for a in alerts if a["detector"] == "crash"]
    assert crashes, f"no crash alert: {alerts}\n{err[-2000:]}"
    latency = crashes[0]["_seen"] - ended
    print(f"torch loop, stamps 10 min behind: crash alert {latency:.2f} s after the log went quiet")
    assert latency < 3.0, f"crash alert took {latency:.2f} s"
    assert abs(crashes[0]["time"] - wall_ended) < 5.0, (crashes[0]["time"], wall_ended)  # the wall clock
    assert "mat1 and mat2" in crashes[0]["message"] or "mat1 and mat2" in json.dumps(crashes[0]["evidence"])
    everything = alerts + [json.loads(line) for line in rest.splitlines()]
    assert not [a for a in everything if a["detector"] == "stall"], everything
    said = [line for line in err.splitlines() if "log stamps run" in line]
    assert len(said) == 1 and "behind" in said[0], err[-2000:]
