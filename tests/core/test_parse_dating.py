"""Events dated as they are built give what dating them after gives (issue 20).

``parsers.final_times``: where no event of a chunk can be dated by a
fallback time (``EventClock.plain``), the column reader gives each event
it builds its final time and ``clocked`` (the step clock's run-on of a
tqdm bar, the hold of a stamped line behind it) instead of building it and
building it again in ``LogStream._ordered``. Each test compares, field by
field (``repr``: NaN equals NaN there), the stream as it is with the same
stream made to date every event after (``plain`` forced False: the path
before issue 20's change) and with the line-by-line reference
(``fast=False``), on logs that reach every branch: stamped step lines
held behind a bar run on past them, a clock stepped back by minutes (held
and not clocked), relaunches whose steps go back, unstamped step lines,
bars redrawn with '\\r' (read on their own, dated in their place), crashes
and health lines between, live and replay, cut anywhere.
"""

from __future__ import annotations

import random
from datetime import UTC
from typing import Any

import pytest

import dflash_watch.parsers.final_times as final_times_module
import dflash_watch.parsers.step_clock as step_clock_module
from dflash_watch.parsers.clock import EventClock
from dflash_watch.parsers.stream import LogStream
from tests.core.test_lanes_in_order import make_progress_log

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/opt/train.py", line 412, in <module>\n'
    "    main()\n"
    "ConnectionResetError: [Errno 104] Connection reset by peer\n"
)


def _stamp(t: float, us: bool) -> str:
    s = int(t)
    hh, mm, ss = s // 3600 % 24, s // 60 % 60, s % 60
    millis = int((t - s) * 1000)
    if us:
        return f"11/29/2026 {hh:02d}:{mm:02d}:{ss:02d}"
    return f"2026-11-29 {hh:02d}:{mm:02d}:{ss:02d},{millis:03d}"


def make_dating_log(seed: int, n: int) -> str:
    """Step lines and bars whose clocks part: a bar's step time runs it on
    past the next step line's stamp (held), the clock steps back by
    minutes now and then (held, not clocked), steps go back (a relaunch),
    unstamped step lines (nanochat's ``dt:``), redrawn bars, tracebacks,
    overflow lines and checkpoint lines between."""
    rnd = random.Random(seed)
    us = rnd.random() < 0.5
    t = 36000.0
    step = 0
    out: list[str] = []
    for _ in range(n):
        r = rnd.random()
        t += rnd.choice([0.0, 0.0, 0.1, 0.5, 1.0, 3.0])
        if rnd.random() < 0.01:
            t -= rnd.choice([1.0, 3.0, 300.0])  # jitter, or NTP stepping the clock back
        if rnd.random() < 0.005:
            step = max(0, step - rnd.randrange(1, 50))  # a relaunch from a checkpoint
        if r < 0.3:
            step += 1
            out.append(
                f"{_stamp(t, us)} - INFO - __main__ - step {step}/5000 | loss 2.{rnd.randrange(1000, 9999)} | "
                f"grad_norm 0.{rnd.randrange(100, 999)} | 2{rnd.randrange(10)}.{rnd.randrange(10)} Ktok/s"
            )
        elif r < 0.5:
            rate = rnd.choice(["2.9it/s", "1.25s/it", "0.00it/s", "14.1it/s"])
            bar = (
                f"Training:  10%|#  | {step}/5000 [01:{rnd.randrange(10, 60)}<40:00, {rate}, "
                f"loss=2.{rnd.randrange(100, 999)}]"
            )
            out.append(bar + ("\r" + bar if rnd.random() < 0.15 else ""))
        elif r < 0.65:
            step += rnd.choice([1, 1, 1, 0])
            out.append(
                f"step {step:05d}/05000 ({step / 50:.2f}%) | loss: 3.{rnd.randrange(100000, 999999)} | "
                f"lrm: 1.00 | dt: {rnd.choice(['13789.96', '250.00', '0.00'])}ms | tok/sec: 38,017"
            )
        elif r < 0.8:
            out.append(f"{_stamp(t, us)} - INFO - data.loader - loaded shard {rnd.randrange(10**6)}")
        elif r < 0.83:
            out.append(TRACEBACK.rstrip("\n"))
        elif r < 0.86:
            out.append(f"{_stamp(t, us)} - INFO - Saving model checkpoint to /ckpt/checkpoint-{step}")
        elif r < 0.88:
            out.append(f"[rank0]: Grad overflow on iteration {step}")
        else:
            out.append("NCCL INFO Channel 02/32 : 0[0] -> 1[1] via P2P/IPC")
    return "\n".join(out) + "\n"


def replay(text: str, cuts: list[int], *, fast: bool = True, replay_mode: bool = True) -> list[str]:
    stream = LogStream("train.log", tz=UTC, default_year=2026, fast=fast, replay=replay_mode)
    events: list[Any] = []
    pos = 0
    lineno = 1
    for k, cut in enumerate(sorted(cuts) + [len(text)]):
        end = text.rfind("\n", pos, cut) + 1 if cut < len(text) else len(text)
        if end <= pos:
            continue
        chunk = text[pos:end]
        events += stream.feed(chunk, lineno, 1000.0 + k)
        lineno += chunk.count("\n")
        pos = end
    events += stream.flush(5000.0)
    return [repr(e) for e in events]


def _dated_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every event dated after it is built (before issue 20's change)."""
    monkeypatch.setattr(EventClock, "plain", property(lambda self: False))


def _cuts(rnd: random.Random, text: str, most: int) -> list[int]:
    return [rnd.randrange(len(text)) for _ in range(rnd.randrange(most))]


@pytest.mark.parametrize("replay_mode", [True, False])
@pytest.mark.parametrize("seed", range(10))
def test_dated_at_build_as_dated_after(seed: int, replay_mode: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    text = make_dating_log(seed, 1500)
    rnd = random.Random(seed)
    cuts = _cuts(rnd, text, 12)
    got = replay(text, cuts, replay_mode=replay_mode)
    reference = replay(text, cuts, fast=False, replay_mode=replay_mode)
    with monkeypatch.context() as m:
        _dated_after(m)
        assert replay(text, cuts, replay_mode=replay_mode) == got
    assert got == reference


@pytest.mark.parametrize("seed", range(6))
def test_the_progress_shape_dated_at_build(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20's progress shape (``test_lanes_in_order``'s log)."""
    text = make_progress_log(seed, 1500)
    cuts = _cuts(random.Random(seed), text, 8)
    got = replay(text, cuts)
    with monkeypatch.context() as m:
        _dated_after(m)
        assert replay(text, cuts) == got
    assert got == replay(text, cuts, fast=False)


def _rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the events built again by the step clock and the one-by-one dating."""
    count = [0]
    real = step_clock_module.at_time

    def counted(event: Any, time: float, clocked: bool | None = None) -> Any:
        count[0] += 1
        return real(event, time, clocked)

    monkeypatch.setattr(step_clock_module, "at_time", counted)
    monkeypatch.setattr(final_times_module, "at_time", counted)
    return count


def test_bars_and_held_step_lines_are_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stamped step line, then a tqdm bar (own step time) run on past the
    next stamps, many times over: the bars are run on and the step lines
    held, each built once with its final time, none built again."""
    step = "11/29/2026 10:{m:02d}:{s:02d} - INFO - __main__ - step {n}/5000 | loss 2.{n}5 | 21.3 Ktok/s"
    bar = "Training:  10%|#  | {n}/5000 [00:0{d}<00:10, 0.50it/s]"
    lines = ["11/29/2026 09:59:59 - INFO - __main__ - step 0/5000 | loss 2.5 | 21.3 Ktok/s"]
    for n in range(1, 400):
        lines.append(step.format(m=n // 60, s=n % 60, n=n))
        lines.append(bar.format(n=n, d=n % 10))
    text = "\n".join(lines) + "\n"
    cut = len(lines[0]) + 1  # the first chunk dates an event: the next is plain
    count = _rebuilds(monkeypatch)
    got = replay(text, [cut])
    assert count[0] == 0
    # The bars run on 2 s a step from the first stamp, the stamps 1 s: each
    # step line is held at the bar before it (clocked: within jitter).
    assert len(got) == 1 + 2 * 399 and all("clocked=True" in e for e in got)
    times = [float(e.split("time=")[1].split(",")[0]) for e in got]
    ten = times[0] + 1.0  # 10:00:00
    assert all(times[2 * k - 1] == times[2 * k - 2] > ten + k for k in range(2, 400))
    with monkeypatch.context() as m:
        _dated_after(m)
        before = count[0]
        assert replay(text, [cut]) == got
        assert count[0] - before >= 399  # each bar built twice that way


def test_a_line_without_a_step_time_takes_the_clock_run_on() -> None:
    """An unstamped line with no step time after the clock ran on takes the
    clock's time, not clocked; before it ran on, its own (``unstamped``)."""
    from dflash_watch.parsers.events import Progress
    from dflash_watch.parsers.step_clock import StepClock

    clock = StepClock()
    lines = [
        Progress(1000.0, "l:1", step=None, clocked=False),
        Progress(1000.0, "l:2", step=1, step_seconds=10.0, clocked=False),
        Progress(1000.0, "l:3", step=None, clocked=False),
    ]
    out = clock.apply(list(lines))
    assert [(e.time, e.clocked) for e in out] == [(1000.0, False), (1010.0, True), (1010.0, False)]
    assert out[0] is lines[0]
