"""A crash loop is one alert per crash: real writers, a real `headless`.

A training process logs progress and dies of an exception (its traceback
to the log); a relaunch appends to the same log, starts again at step 0 and
dies of the same exception seconds later. Each death is an incident of its
own: the crash detector's merge window (60 s) is for copies of ONE incident
(ranks printing the same traceback, a cascade), never across a restart.
Live and replay must agree on two alerts.
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

# A real training script as users write it: Python logging to stderr, an
# uncaught exception at the end (its traceback goes to stderr too).
TRAIN = textwrap.dedent("""\
    import logging, sys, time
    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
    log = logging.getLogger("train")
    steps, message = int(sys.argv[1]), sys.argv[2]

    def forward(step):
        raise ValueError(f"{message} at step {step}")

    for step in range(steps):
        log.info("step %d/1000 | loss %.3f | 21500 tok/s", step, 2.0 / (step + 1))
        time.sleep(0.1)
    forward(steps)
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users do not set it
    return env


def _train(script: Path, log: Path, steps: int, message: str) -> None:
    """One launch of the job, appending stdout and stderr to the log
    (``python train.py >> log 2>&1``)."""
    with log.open("a", encoding="utf-8") as out:
        code = subprocess.run(
            [sys.executable, str(script), str(steps), message],
            stdout=out, stderr=subprocess.STDOUT, env=_env(), timeout=60,
        ).returncode
    assert code == 1


def _alert(proc: subprocess.Popen[str], timeout: float) -> dict | None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    return json.loads(line) if line else None


@pytest.mark.parametrize(
    "second_message, gap_s",
    [
        ("bad batch", 2.0),  # the same traceback twice: a crash loop
        ("corrupt shard", 2.0),  # the same type, another message
        pytest.param("bad batch", 25.0, marks=pytest.mark.slow),  # the 25 s apart
    ],
)
def test_a_relaunch_that_crashes_again_is_a_second_alert_live_and_in_replay(
    tmp_path: Path, second_message: str, gap_s: float
) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN, encoding="utf-8")
    log = tmp_path / "train.log"
    log.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
    )
    try:
        time.sleep(1.0)  # attached
        _train(script, log, 5, "bad batch")
        died = time.monotonic()
        first = _alert(proc, 10.0)
        assert first is not None, f"no alert for the first crash: {proc.poll()}"
        # The relaunch: well inside the 60 s merge window of the first crash.
        time.sleep(max(0.0, gap_s - (time.monotonic() - died) - 0.6))
        _train(script, log, 5, second_message)
        second = _alert(proc, 10.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert second is not None, f"the relaunch's crash gave no alert; stderr: {err[-2000:]}"
    live = [first, second] + [json.loads(line) for line in rest.splitlines()]
    crashes = [a for a in live if a["detector"] == "crash"]
    assert [(a["kind"], a["severity"], a["evidence"]["exc_type"]) for a in crashes] == [
        ("exception", "critical", "ValueError")
    ] * 2
    assert crashes[1]["evidence"]["message"] == f"{second_message} at step 5"
    text = log.read_text(encoding="utf-8")
    assert text.count("Traceback (most recent call last)") == 2 and text.count(" - step 0/1000 ") == 2
    # The two crashes cite their own lines of the log.
    lines = text.splitlines()
    cited = [int(a["source"].rsplit(":", 1)[1]) for a in crashes]
    assert [lines[n - 1].startswith("ValueError: ") for n in cited] == [True, True] and cited[0] < cited[1]

    replay = subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", "replay", str(log), "--json"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert replay.returncode == 0, replay.stderr
    replayed = [json.loads(line) for line in replay.stdout.splitlines()]
    assert [(a["detector"], a["kind"], a["source"]) for a in replayed if a["detector"] == "crash"] == [
        (a["detector"], a["kind"], a["source"]) for a in crashes
    ]
