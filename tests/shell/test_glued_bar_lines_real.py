"""Real tqdm and ``logging`` on one stream: every step line read, with its
own loss and its own stamp.

A training script draws its tqdm bar on stderr and logs there too, output
``2> run.log``. tqdm ends no redraw with a newline, so each record shares the
bar's physical line: right after its last redraw, or after tqdm's clear
with ``logging_redirect_tqdm`` (``parsers.glued``). The writer is
``tests/fixtures/glued_bars/write_glued.py``; the logs it wrote are kept
beside it (``plain.log``, ``redirect.log``), and
``tests/shell/test_live_equals_replay.py`` feeds them through the real tailer.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import Progress
from dflash_watch.replay import replay

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "glued_bars"
WRITER = FIXTURES / "write_glued.py"
RECORD = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO step (\d+) \| loss ([0-9.]+) \| (\d+) tok/s")

needs_tqdm = pytest.mark.skipif(importlib.util.find_spec("tqdm") is None, reason="the bar is drawn by real tqdm")


def _text(log: Path) -> str:
    with open(log, encoding="utf-8", newline="") as fh:  # keep the '\r's
        return fh.read()


def _written(log: Path) -> dict[int, tuple[float, float, float]]:
    """step -> (its stamp, loss, tok/s) as the script logged them."""
    out = {}
    for stamp, step, loss, tok in RECORD.findall(_text(log)):
        t = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
        out[int(step)] = (t, float(loss), float(tok))
    return out


def _replayed(log: Path) -> list[Progress]:
    monitor = Monitor()
    seen: list[Progress] = []
    feed = monitor.feed_events

    def spy(events):  # noqa: ANN001, ANN202
        events = list(events)
        seen.extend(e for e in events if type(e) is Progress)
        return feed(events)

    monitor.feed_events = spy  # type: ignore[method-assign]
    replay([str(log)], monitor=monitor, tz=UTC)
    return seen


def _check(log: Path) -> None:
    written = _written(log)
    assert len(written) >= 10, "the script logged its step lines"
    glued = [line for line in _text(log).split("\n") if "it/s]" in line and "INFO step" in line]
    assert len(glued) == len(written), "every record shares its line with the bar"
    seen = _replayed(log)
    steps = {p.step: p for p in seen if p.tokens_per_s is not None}
    assert sorted(steps) == sorted(written), "every step line is read, once"
    for step, (stamp, loss, tok) in written.items():
        p = steps[step]
        assert (p.loss, p.tokens_per_s, p.clocked) == (loss, tok, True), step
        assert abs(p.time - stamp) < 0.2, (step, p.time, stamp)  # its own stamp (held at most by jitter)
    # The bar is read as before: every state with a rate (from step 1), in it/s.
    assert {p.step for p in seen if p.rate_unit == "it/s"} == set(range(1, 61))


@pytest.mark.parametrize("name", ["plain.log", "redirect.log"])
def test_the_kept_logs_replay_every_step_line_with_its_own_loss_and_stamp(name: str) -> None:
    _check(FIXTURES / name)


@needs_tqdm
@pytest.mark.parametrize("layout", ["plain", "redirect"])
def test_a_real_tqdm_and_logging_script_replays_every_step_line(layout: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users run without it
    log = tmp_path / "run.log"
    with open(log, "wb") as err:
        subprocess.run([sys.executable, str(WRITER), layout], stderr=err, env=env, check=True, timeout=60)
    if layout == "redirect":
        assert "\r" + " " * 10 in _text(log), "tqdm cleared its bar before each record"
    _check(log)
