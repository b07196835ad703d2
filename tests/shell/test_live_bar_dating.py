"""Live, a log without timestamps: nothing read is dated after it was read.

Unstamped step lines are dated by their step times (``parsers.step_clock``),
run on from the time the chunk that holds them was read. A chunk that holds
many of them (a tqdm bar's line completed by its newline, or by the
traceback written right after it; a burst) put its last states, and the
crash after them, as far ahead of the watcher's clock as the states span:
a bar of 59 redraws 0.2 s apart then a traceback fired a stall at the crash
(11 s "without a step" when the clock jumped). They now end at the read time
(``parsers.clock._run_back``); the durations between them are kept.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.live import LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import Crash, Progress

REALRUNS = Path(__file__).resolve().parents[2] / "scripts" / "realruns"

# A training script's tqdm bar on stderr (s/it, no newline: HF's bar ends
# its line only with the epoch), then an uncaught exception: the traceback
# is appended right after the bar's last redraw, as `python train.py >
# train.log 2>&1` writes it.
BAR_THEN_CRASH = textwrap.dedent(r"""
    import sys, time
    print("Starting training", flush=True)
    t0 = time.time()
    for n in range(1, {steps} + 1):
        el = time.time() - t0
        sys.stderr.write(f"\r  {{n}}%|#         | {{n}}/100 [00:{{int(el):02d}}<01:00, {{max(el, 1e-3) / n:.2f}}s/it]")
        sys.stderr.flush()
        time.sleep({pause})
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)")
""")

# HF Trainer's shape: the bar cleared for a logging dict every 10 steps.
BAR_WITH_DICTS = textwrap.dedent(r"""
    import sys, time
    t0 = time.time()
    for n in range(1, {steps} + 1):
        el = time.time() - t0
        sys.stderr.write(f"\r  {{n}}%|#         | {{n}}/1000 [00:{{int(el):02d}}<10:00, {{n / max(el, 1e-3):.2f}}it/s]")
        sys.stderr.flush()
        if n % 10 == 0:
            sys.stderr.write("\r" + " " * 80 + "\r" + "{{'loss': 2.31, 'learning_rate': 5e-05, 'epoch': 0.%02d}}\n" % n)
            sys.stderr.flush()
        time.sleep({pause})
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users run without it
    return env


class _Ahead:
    """How far ahead of this machine's clock the Monitor was handed events."""

    def __init__(self, monitor: Monitor) -> None:
        self.worst = 0.0
        self.events: list = []
        self.writer_done = 0.0
        feed = monitor.feed_events

        def spy(events):  # noqa: ANN001, ANN202
            events = list(events)
            wall = time.time()
            for e in events:
                self.worst = max(self.worst, e.time - wall)
            self.events.extend(events)
            return feed(events)

        monitor.feed_events = spy  # type: ignore[method-assign]


def _watch(tmp_path: Path, script: str, stall_s: float, after: float = 2.0) -> tuple[Monitor, _Ahead]:
    log = tmp_path / "train.log"
    log.write_text("")
    writer = tmp_path / "train.py"
    writer.write_text(script)
    monitor = Monitor(detector_config=DetectorConfig(stall_min_s=stall_s, stall_first_s=stall_s))
    ahead = _Ahead(monitor)
    with LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.1):
        time.sleep(0.5)
        with open(log, "ab") as out:
            subprocess.run([sys.executable, str(writer)], stdout=out, stderr=subprocess.STDOUT, env=_env(),
                           timeout=120, check=False)
        ahead.writer_done = time.time()
        time.sleep(after)
    return monitor, ahead


def test_a_bar_ended_by_a_traceback_is_one_crash_on_the_clock_and_no_stall(tmp_path: Path) -> None:
    """The bar's states are read live as redraws; the traceback completes
    its line with a state not read yet: that state and the crash are dated
    when they were read, not 8 s on, so no silence opens before the crash."""
    monitor, ahead = _watch(tmp_path, BAR_THEN_CRASH.format(steps=40, pause=0.2), stall_s=5.0)
    alerts = [(a.detector, a.state) for a in monitor.alerts.history]
    assert ("crash", "firing") in alerts, alerts
    assert [a for a in alerts if a[0] == "stall"] == [], alerts
    assert ahead.worst < 1.0, f"events dated {ahead.worst:.1f} s ahead of the clock"
    crashes = [e for e in ahead.events if type(e) is Crash]
    steps = [e for e in ahead.events if type(e) is Progress]
    assert crashes and steps and steps[-1].step == 40
    assert crashes[0].time - steps[-2].time < 2.0  # the last states 0.2 s apart, the crash right after


def test_hf_bars_between_logging_dicts_never_run_ahead_of_the_clock(tmp_path: Path) -> None:
    """Each dict line completes a bar line whose states since the last look
    were drawn over the last poll: they end at the read time (they ran 1.0
    to 1.4 s ahead)."""
    monitor, ahead = _watch(tmp_path, BAR_WITH_DICTS.format(steps=60, pause=0.1), stall_s=30.0)
    steps = [e.step for e in ahead.events if type(e) is Progress and e.step is not None]
    assert steps and max(steps) == 60
    assert ahead.worst < 0.5, f"events dated {ahead.worst:.2f} s ahead of the clock"
    assert [a.detector for a in monitor.alerts.history] == []


def test_bar_states_read_as_drawn_are_no_burst_when_a_dict_line_ends_them(tmp_path: Path) -> None:
    """HF Trainer ends its bar's line with a logging dict every
    ``logging_steps``: the states on that line were read live as they were
    drawn, so the newline is no burst of a block-buffered writer. It was
    taken for one (said, with advice to run ``python -u`` that changes
    nothing), and a stall then waited for 2.5 of its intervals (HF's
    default of 500 steps at 1 s: 21 min) instead of ``stall_min_s``."""
    script = BAR_WITH_DICTS.replace("n % 10 == 0", "n % 30 == 0").format(steps=90, pause=0.1)
    monitor, ahead = _watch(tmp_path, script, stall_s=2.0, after=7.0)
    assert [n for n in monitor.notices if "burst" in n] == []
    stalls = [a for a in monitor.alerts.history if a.detector == "stall" and a.state == "firing"]
    assert stalls, [(a.detector, a.state) for a in monitor.alerts.history]
    assert stalls[0].time - ahead.writer_done < 4.5  # its threshold (3 s), a poll, a tick; was 7.5 s (2.5 x 3 s)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers (a real HF Trainer)")
def test_a_real_hf_trainer_run_unbuffered_is_not_called_block_buffered(tmp_path: Path) -> None:
    """A real HF Trainer run with PYTHONUNBUFFERED=1 (the advice the
    notice gives): its logging dicts end the bar's line every 25 steps.
    headless said its output was block-buffered and to set the variable
    that was set."""
    log = tmp_path / "train.log"
    log.write_text("")
    headless = subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(1.0)
        env = {**_env(), "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        with open(log, "ab") as out:
            run = subprocess.run(
                [sys.executable, str(REALRUNS / "hf_trainer_slowdown.py"), "--steps", "150", "--drop-step", "10000",
                 "--pace", "0.1"],
                cwd=REALRUNS, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=300, check=False,
            )
        assert run.returncode == 0, log.read_text()[-2000:]
        time.sleep(2.0)
    finally:
        headless.send_signal(signal.SIGTERM)
        _, err = headless.communicate(timeout=30)
    assert log.read_text().count("'loss'") >= 5  # the dicts came between the bar's states
    assert "burst" not in err, err
