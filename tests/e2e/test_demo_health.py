"""`dflash-watch demo --scene health`: the training-health alerts of a whole simulated run.

The demo runs for real (the simulator as its child process, no TUI: the
alerts as contract JSON lines, until the simulated job exits). On top of
the seed's story the scene plays a NaN loss, a straggler rank and an Xid
with thermal throttling (``dflash_watch.demo.health``): the loss,
straggler and gpu_health detectors must each say so, and the story's own
alerts still come. At 30x a poll of the probe files lags the log by at
most ~30 simulated seconds, under the straggler's 60 s hung threshold.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_health_scene_raises_loss_straggler_and_xid_alerts() -> None:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    out = subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", "demo", "--scene", "health", "--no-tmux", "--headless",
         "--speed", "30"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, env=env,
    )
    assert out.returncode == 0, out.stderr
    alerts = [json.loads(line) for line in out.stdout.strip().splitlines()]
    fired = [(a["detector"], a.get("kind")) for a in alerts if a["state"] == "firing"]
    assert ("loss", "nan") in fired
    (slow,) = [a for a in alerts if a["detector"] == "straggler" and a["state"] == "firing" and a.get("kind") == "slow"]
    assert slow["rank"] == 2
    xids = [a for a in alerts if a["detector"] == "gpu_health" and a["state"] == "firing" and a.get("kind") == "xid"]
    assert [a["gpu"] for a in xids] == [6] and "48" in xids[0]["message"]
    assert ("straggler", "hung") not in fired  # the ranks all step on
    order = [d for d, _ in fired]
    assert order.index("throughput_drop") < order.index("fx_tracing") < order.index("process_exit")
