"""Live wiring: the clock that follows the data, and progress seen mid-line."""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dflash_watch.live import FollowClock, LiveSession
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuSample


class Wall:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_follow_clock_runs_on_from_the_latest_data_and_follows_a_relaunch() -> None:
    monitor = Monitor(keep_lines=0)
    wall = Wall(1000.0)
    clock = FollowClock(monitor, speed=10.0, wall=wall)
    assert clock() == 1000.0  # no data yet: the wall clock
    monitor.feed_samples([GpuSample(5000.0, 0, 1, 2)])
    clock.observe()
    wall.t += 3
    assert clock() == 5030.0  # 3 wall seconds at 10x past the data
    # A relaunch whose data starts behind where the silence ran on to.
    monitor.feed_samples([GpuSample(5020.0, 0, 1, 2)])
    clock.observe()
    assert clock() == 5020.0


def test_follow_clock_runs_on_from_when_caught_up_data_was_written() -> None:
    """A catch-up's end was written at the file's mtime: the clock runs on
    from then (the silence before the watch counts), never from later than
    the read, and only at the real speed (the demo's compressed clock runs
    on from its reads)."""
    monitor = Monitor(keep_lines=0)
    wall = Wall(10_000.0)
    clock = FollowClock(monitor, wall=wall)
    monitor.feed_samples([GpuSample(4000.0, 0, 1, 2)])
    clock.observe(written=7000.0)  # written 3000 s before it was read
    assert clock() == 7000.0
    clock.observe(written=9999.0)  # the same data: never moved forward again
    assert clock() == 7000.0
    wall.t += 5
    monitor.feed_samples([GpuSample(7010.0, 0, 1, 2)])
    clock.observe(written=20_000.0)  # written "after" the read: the read holds
    assert clock() == 7010.0
    fast = FollowClock(monitor, speed=10.0, wall=wall)
    fast.observe(written=1.0)
    assert fast() == 7010.0


def test_follow_clock_keeps_the_write_time_for_events_that_come_later_out_of_the_same_data() -> None:
    """A caught-up log's last traceback becomes its crash only when the log
    is found quiet, after the feed: that crash was written with the rest
    (at the file's mtime), so the clock runs on from then, not from the
    moment the crash came out. Re-anchored on that moment it went back by
    the whole silence (seen: 7370 s), and a crash that had arrived while it
    ran ahead was held until it came back: the finished log's crash alert
    did not come while the watcher ran (tests/shell/test_attach_finished.py,
    a catch-up fast enough for a tick to fall before the quiet)."""
    monitor = Monitor(keep_lines=0)
    wall = Wall(10_000.0)
    clock = FollowClock(monitor, wall=wall)
    monitor.feed_samples([GpuSample(4000.0, 0, 1, 2)])
    clock.observe(written=7000.0)  # the catch-up: written 3000 s before it was read
    assert clock() == 7000.0
    wall.t += 2
    monitor.feed_samples([GpuSample(4081.0, 0, 1, 2)])  # the end's crash, out at the quiet: no feed, no observe
    assert clock() == 4081.0 + (10_002.0 - 7000.0)  # from the write, as the data before it
    assert clock() >= 7002.0  # never back
    wall.t += 1
    monitor.feed_samples([GpuSample(9000.0, 0, 1, 2)])  # fresh data, fed and observed: from its read
    clock.observe()
    assert clock() == 9000.0


def test_follow_clock_a_gpu_sample_between_the_catch_up_and_its_crash_keeps_the_write_time() -> None:
    """A GPU sample is stamped on the live clock (``side_feed``, not a feed of
    the log): the crash that comes out at the quiet after it still runs on
    from the caught-up log's mtime. Before, the sample re-anchored the clock
    and cleared the write time, and the crash then took it back by the
    whole silence."""
    monitor = Monitor(keep_lines=0)
    wall = Wall(10_000.0)
    clock = FollowClock(monitor, wall=wall)
    monitor.feed_samples([GpuSample(4000.0, 0, 1, 2)])  # the catch-up
    clock.observe(written=7000.0)
    wall.t += 1
    with clock.side_feed():  # a sample, on the live clock
        monitor.feed_samples([GpuSample(clock(), 0, 1, 2)])
        assert clock() == 7001.0 and clock.offset() == 7001.0 - 10_001.0  # (an alert's time read meanwhile)
    assert clock() == 7001.0
    wall.t += 1
    monitor.feed_samples([GpuSample(4081.0, 0, 1, 2)])  # the end's crash, out at the quiet
    assert clock() == 4081.0 + (10_002.0 - 7000.0)


def test_follow_clock_goes_back_only_on_a_feed_of_the_log() -> None:
    """An event that comes between feeds behind where the clock ran on (no
    write time kept: the data was read as it came) leaves the clock where
    it is; a deadline set while it ran ahead would wait for it to come back.
    A feed of the log does take it back (a relaunch whose clock starts
    behind)."""
    monitor = Monitor(keep_lines=0)
    wall = Wall(10_000.0)
    clock = FollowClock(monitor, wall=wall)
    monitor.feed_samples([GpuSample(4000.0, 0, 1, 2)])
    clock.observe()
    wall.t += 600
    assert clock() == 4600.0
    monitor.feed_samples([GpuSample(4010.0, 0, 1, 2)])  # out of fed data, later: no feed, no observe
    assert clock() == 4600.0
    wall.t += 1
    monitor.feed_samples([GpuSample(4700.0, 0, 1, 2)])  # ahead of it: followed
    assert clock() == 4700.0
    monitor.feed_samples([GpuSample(4020.0, 0, 1, 2)])  # the relaunch, fed
    clock.observe()
    assert clock() == 4020.0


def _watch_bar(tmp_path: Path, first: str, steps: int, pause: float, wait: float, until: Callable[[Monitor], bool]) -> Monitor:
    """A live session on a log holding ``first``, then a tqdm bar redrawn
    ``steps`` times ``pause`` s apart that never ends its line; watched
    until ``until(monitor)`` or ``wait`` s. Compressed time: 1 s of wall is
    1 min of data."""
    log = tmp_path / "train.log"
    log.write_text(first)
    monitor = Monitor()
    with LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.05, speed=60.0):
        with open(log, "a", encoding="utf-8") as fh:
            for step in range(1, steps + 1):
                fh.write(f"\r{step}%|#         | {step}/100 [00:{step:02d}<01:40, 1.00it/s]")
                fh.flush()
                time.sleep(pause)
        deadline = time.time() + wait
        while time.time() < deadline and not until(monitor):
            time.sleep(0.05)
    return monitor


def test_a_tqdm_bar_without_newline_is_progress_live_and_no_stall(tmp_path: Path) -> None:
    """HF Trainer bars end their line only with the epoch: live, the watch
    must still see the steps (from the newest redraw) and not call it a stall."""
    monitor = _watch_bar(tmp_path, "2026-11-29 10:00:00 - INFO - starting\n", 30, 0.1, 5.0,
                         lambda m: m.last_progress is not None and m.last_progress.step >= 30)
    assert monitor.last_progress is not None and monitor.last_progress.step == 30
    assert [a for a in monitor.alerts.history if a.detector == "stall"] == []


def test_alert_history_file_gets_every_alert_as_contract_json(tmp_path: Path) -> None:
    import json

    from dflash_watch.parsers.events import GpuLost

    history = tmp_path / "sub" / "alerts.jsonl"
    monitor = Monitor(keep_lines=0)
    session = LiveSession(monitor, use_nvml=False, alerts_file=str(history))
    assert session._history is not None
    monitor.feed_samples([GpuLost(100.0, 3, "GPU is lost")])
    monitor.finish()
    (line,) = history.read_text().splitlines()
    alert = json.loads(line)
    assert (alert["detector"], alert["kind"], alert["state"]) == ("crash", "cuda_error", "firing")
    assert alert["message"].startswith("CUDA error") and "GPU 3 lost" in alert["message"]


def test_auto_relaunch_crash_loop_raises_one_critical_alert() -> None:
    from dflash_watch.control.autorelaunch import AutoRelaunchConfig, AutoRelaunchPolicy
    from dflash_watch.parsers.events import ProcessExit

    class CrashingJob:
        """Exits with the same crash right after every relaunch."""

        def __init__(self) -> None:
            self.relaunches = 0
            self.pending = True

        def poll_exit(self, now, signature=None):  # noqa: ANN001
            if self.pending:
                self.pending = False
                return ProcessExit(now, "crash", code=1, signature="OOM@train.py:step")
            return None

        def relaunch(self, *a, **k):  # noqa: ANN002, ANN003
            self.relaunches += 1
            self.pending = True

    job = CrashingJob()
    monitor = Monitor(keep_lines=0)
    policy = AutoRelaunchPolicy(AutoRelaunchConfig(enabled=True, backoff_s=0, crash_loop_count=3))
    session = LiveSession(monitor, use_nvml=False, job=job, auto_relaunch=policy)
    for i in range(20):
        event = session._poll_exit(1000.0 + i)
        if event is not None:
            monitor.feed_events((event,))
    loops = [a for a in monitor.alerts.history if a.evidence.get("crash_loop")]
    assert len(loops) == 1 and loops[0].severity == "critical" and "crash loop" in loops[0].message
    assert job.relaunches == 2  # the third identical crash stops it
    assert monitor.restarts == 2


def test_a_busy_log_is_polled_twice_a_second_not_at_every_flush(tmp_path: Path, monkeypatch) -> None:
    """A run flushes its log ~10 times a second; the dashboard must not wake (nor make
    watchdog's threads wake) at every flush, and must still show a line within a second."""
    from dflash_watch.sources import logtail, wakeups

    polls: list[float] = []
    events: list[str] = []
    real_poll = logtail.LogTailer.poll
    real_on_event = wakeups.Wakeups.on_event

    def counting_poll(self):  # noqa: ANN001, ANN202
        polls.append(time.monotonic())
        return real_poll(self)

    def counting_on_event(self, src, dest):  # noqa: ANN001, ANN202
        events.append(src)
        return real_on_event(self, src, dest)

    monkeypatch.setattr(logtail.LogTailer, "poll", counting_poll)
    monkeypatch.setattr(wakeups.Wakeups, "on_event", counting_on_event)
    log = tmp_path / "train.log"
    log.write_text("")
    monitor = Monitor()
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.5)
    with session:
        time.sleep(0.3)  # the watches are set up
        start = time.monotonic()
        with open(log, "a", encoding="utf-8") as fh:
            n = 0
            while time.monotonic() - start < 2.0:
                n += 1
                fh.write(f"line {n}\n")
                fh.flush()
                time.sleep(0.02)
        wrote = time.monotonic()
        while time.monotonic() - wrote < 2.0 and monitor.lines.get(str(log), [(0, "")])[-1][1] != f"line {n}":
            time.sleep(0.02)
        seen = time.monotonic() - wrote
    assert events == []  # the kernel sent no event per flush (watchdog asks only for create/move/delete)
    assert seen < 1.0
    busy = [t for t in polls if start <= t <= wrote]
    assert 2 <= len(busy) <= 7, len(busy)  # about 5 in 2 s, not one per flush (~100)


def test_a_jobs_last_lines_are_read_before_its_exit_is_judged(tmp_path: Path) -> None:
    """The exit names the crash the log just showed: the tick asks the (polling) log
    tailer for a fresh round before it asks the job whether it ended."""
    from types import SimpleNamespace

    from dflash_watch.control.exits import signature_now
    from dflash_watch.parsers.events import ProcessExit

    log = tmp_path / "train.log"
    log.write_text("[2026-11-29 10:00:00,000] [INFO] [dflash.train] step 5/100 | 21.5 Ktok/s\n")

    class Job:
        def __init__(self) -> None:
            self.ended = False
            self.signatures: list = []

        def status(self):  # noqa: ANN201
            return SimpleNamespace(state="exited" if self.ended else "running", pids=())

        def poll_exit(self, now, signature=None):  # noqa: ANN001, ANN201
            if not self.ended or self.signatures:
                return None
            signature = signature_now(signature)  # (a function of the live session's, as real jobs take it)
            self.signatures.append(signature)
            return ProcessExit(now, "crash", code=1, signature=signature)

    job = Job()
    monitor = Monitor()
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, job=job, tick_s=0.05, tail_poll_s=5.0)
    with session:
        time.sleep(0.3)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write('Traceback (most recent call last):\n  File "/opt/train.py", line 10, in <module>\n'
                     "    loss.backward()\ntorch.OutOfMemoryError: CUDA out of memory.\n"
                     "[2026-11-29 10:00:01,000] [INFO] [dflash.train] bye\n")
        job.ended = True  # it wrote its traceback, then ended
        deadline = time.time() + 3
        while time.time() < deadline and not job.signatures:
            time.sleep(0.02)
    assert job.signatures and job.signatures[0] is not None and "OutOfMemoryError" in job.signatures[0]


def test_a_bar_read_live_as_redraws_is_not_read_again_when_its_line_ends(tmp_path: Path) -> None:
    """HF Trainer's bar: live, each redraw is progress as it comes; when the
    line's newline finally comes, its states are not fed a second time (steps
    would go back and the throughput detector would see a relaunch)."""
    log = tmp_path / "train.log"
    log.write_text("")
    monitor = Monitor()
    steps: list = []
    real = monitor._handle_progress

    def seen(event):  # noqa: ANN001, ANN202
        steps.append(event.step)
        return real(event)

    monitor._handle_progress = seen  # type: ignore[method-assign]
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, tick_s=0.05)
    with session:
        with open(log, "a", encoding="utf-8") as fh:
            for step in range(1, 11):
                fh.write(f"\r{step * 10}%|#         | {step}/10 [00:{step:02d}<00:10, 1.00it/s]")
                fh.flush()
                time.sleep(0.12)
            fh.write("\n")
        deadline = time.time() + 5
        while time.time() < deadline and monitor.quiet_since is None:
            time.sleep(0.05)
    assert steps, "no progress read live"
    assert steps == sorted(steps), steps  # never back
    assert steps[-1] == 10 and len(steps) == len(set(steps))


def test_a_burst_holding_the_logs_first_stamp_dates_the_lines_after_it_by_that_stamp() -> None:
    """nanochat (shared log 18): 1066 step lines without a stamp, read live
    on the wall clock, then a burst with the log's first stamp (a glog
    warning 45 days before) and more steps, one of them without a duration
    ("Step 02250 | Validation bpb"). That line is read at the step clock the
    stamp started, not at the wall clock the burst began on: else each such
    line opens (and the next step closes) a silence of 45 days."""
    corpus = Path(__file__).resolve().parents[2].parent / "shared" / "realworld"
    log = next(corpus.glob("18_*.log"), None)
    if log is None:
        pytest.skip(f"the shared real-world corpus is not at {corpus}")
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("[rank0]:W1016"))
    monitor = Monitor(keep_lines=0)
    seen: list = []
    monitor.subscribe(seen.append)
    wall = time.time()
    monitor.feed_text(str(log), "".join(lines[:first]), 1, wall)
    validation: list = []
    original = monitor._handle_progress

    def handle(event):  # noqa: ANN001, ANN202
        if getattr(event, "step", None) == 2250 and event.step_seconds is None:
            validation.append(event.time)
        return original(event)

    monitor._handle_progress = handle
    monitor.feed_text(str(log), "".join(lines[first:]), first + 1, monitor.last_event_time)
    monitor.quiet(monitor.last_event_time, monitor.last_event_time)
    monitor.finish()
    assert [(a.detector, a.state) for a in seen] == [("recompile", "firing")]
    assert validation and validation[0] < wall - 40 * 86400


CRASHING_RUN = textwrap.dedent("""\
    import sys, time, traceback
    with open(sys.argv[1], "a", encoding="utf-8") as log:
        for step in range(1, 6):
            log.write(f"2026-11-29 10:00:0{step} - INFO - train - step {step}/1000 | loss 2.1 | 21.5 Ktok/s\\n")
        try:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except RuntimeError:
            traceback.print_exc(file=log)
    sys.exit(1)  # at once: the job is seen ended before the log goes quiet
""")


def test_the_crash_loop_guard_counts_each_crash_by_its_traceback_not_its_exit_status(tmp_path: Path) -> None:
    """A real job (a child process) that writes its traceback last and exits
    at once, relaunched by the guard: each end is counted by the crash that
    the log shows (its traceback, still held by the parser when the exit is
    seen), so two identical crashes are a crash loop. Read before the
    traceback was complete, the first end counted as ``code:1``, or one as
    the traceback and the next as ``code:1``, and identical crashes never
    made a loop: the job was relaunched up to ``max_restarts``."""
    from dflash_watch.control.autorelaunch import AutoRelaunchConfig, AutoRelaunchPolicy
    from dflash_watch.control.child import ChildJob

    log = tmp_path / "train.log"
    log.write_text("")
    script = tmp_path / "train.py"
    script.write_text(CRASHING_RUN)
    # (The run writes its log itself and closes it before it exits: no stdout buffer in play.)
    job = ChildJob([sys.executable, str(script), str(log)], grace_s=1.0)
    monitor = Monitor(keep_lines=0)
    policy = AutoRelaunchPolicy(AutoRelaunchConfig(enabled=True, backoff_s=0, crash_loop_count=2, max_restarts=5))
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, job=job, auto_relaunch=policy, tick_s=0.1)
    job.start()
    with session:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(a.evidence.get("crash_loop") for a in monitor.alerts.history):
            time.sleep(0.1)
    loops = [a for a in monitor.alerts.history if a.evidence.get("crash_loop")]
    assert len(loops) == 1, [(a.detector, a.kind, a.message) for a in monitor.alerts.history]
    assert "RuntimeError" in loops[0].message and "code:" not in loops[0].message, loops[0].message
    assert monitor.restarts == 1  # the second identical crash stopped it
    exits = [a for a in monitor.alerts.history if a.detector == "process_exit" and not a.evidence.get("crash_loop")]
    assert len(exits) == 2 and all("RuntimeError" in a.message for a in exits), [a.message for a in exits]


def test_a_log_that_is_only_a_bar_so_far_is_a_stall_when_the_bar_stops(tmp_path: Path) -> None:
    """A run whose only output is a tqdm bar (``python train.py > log 2>&1``,
    no line ended yet): the session ticks once the bar is seen, so a bar
    that stops drawing is a stall while the run hangs, not only when the
    watcher quits."""
    monitor = _watch_bar(tmp_path, "", 20, 0.05, 15.0, lambda m: any(a.detector == "stall" for a in m.alerts.history))
    stalls = [a for a in monitor.alerts.history if a.detector == "stall"]
    assert monitor.last_progress is not None and monitor.last_progress.step == 20
    assert stalls and stalls[0].state == "firing", [(a.detector, a.state) for a in monitor.alerts.history]
