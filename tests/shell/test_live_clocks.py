"""Live judgement never depends on the log's stamps agreeing with the wall clock.

Real processes throughout: a real `dflash-watch headless` started before
the log exists, and a real Python writer. The writer stamps its lines
minutes or hours off this machine's clock (a skewed host; naive UTC stamps
in a container read on a host two hours off), or writes through a
block-buffered stdout (``python train.py > log`` without ``-u``:
PYTHONUNBUFFERED, which these machines set, is removed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from headless_helpers import alert_lines, wait_for_notice

WRITER = textwrap.dedent(
    """
    import datetime, os, sys, time
    offset, count, every, stamped = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
    crash = sys.argv[5] == "1"
    # Until the test's go mark is there (its marks are not in the log): lines
    # this far apart (a run's slow start), and none after line ``hold``.
    slow, hold = (float(sys.argv[6]), int(sys.argv[7])) if len(sys.argv) > 7 else (0.0, 0)
    go = sys.argv[0] + ".go"
    pad = "x" * 120  # a long line: the 8 KiB stdout buffer fills every ~45 lines
    for i in range(1, count + 1):
        stamp = (datetime.datetime.now() + datetime.timedelta(seconds=offset)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        head = f"{stamp} - INFO - train - " if stamped else ""
        print(f"{head}step {i}/100000 | loss 2.31 | 21.5 Ktok/s | {pad}")
        if i == hold:
            open(sys.argv[0] + ".held", "w").close()
            while not os.path.exists(go):
                time.sleep(0.01)
        time.sleep(slow if slow and not os.path.exists(go) else every)
    open(sys.argv[0] + ".done", "w").close()  # all lines printed (the test's own mark, not in the log)
    if crash:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    time.sleep(3600)  # a hang: nothing more is written, the buffer is never flushed
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users' runs are not unbuffered
    return env


def _headless(tmp_path: Path, log: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log), *extra],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _writer(tmp_path: Path, log: Path, *args: object, unbuffered: bool) -> subprocess.Popen[bytes]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    cmd = [sys.executable, *(["-u"] if unbuffered else []), str(script), *map(str, args)]
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env())


def _alerts(proc: subprocess.Popen[str], until: float, stop: Callable[[dict], bool] | None = None) -> list[dict]:
    """Alert lines until the monotonic time ``until`` (or a line ``stop``
    accepts), each ``_seen`` on the monotonic clock the writers are timed on."""
    return alert_lines(proc, until - time.monotonic(), stop, clock=time.monotonic)


def _no_stall_beside(headless: subprocess.Popen[str], writer: subprocess.Popen[str], side: Path,
                     line_now: Callable[[], str], seconds: float) -> None:
    """For ``seconds``, append ``line_now()`` (stamped on this machine's
    clock) to ``side`` every 0.25 s while the lagging writer runs; headless
    must fire no stall meanwhile."""
    end = time.monotonic() + seconds
    alerts: list[dict] = []
    with open(side, "a", encoding="utf-8") as fh:
        while time.monotonic() < end:
            fh.write(line_now())
            fh.flush()
            alerts += _alerts(headless, time.monotonic() + 0.25)
    assert writer.poll() is None, "the writer ended early: the test saw no live run"
    stalls = [a for a in alerts if a["detector"] == "stall"]
    assert not stalls, stalls


def _stop(*procs: subprocess.Popen) -> str:
    err = ""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        try:
            out = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()
        if isinstance(out[1], str):
            err += out[1]
    return err


@pytest.mark.slow
@pytest.mark.parametrize("offset", [-600.0, -7200.0, 3600.0, 0.0], ids=["10min-behind", "2h-behind", "1h-ahead", "on-time"])
def test_crash_alert_within_a_second_of_quiet_whatever_the_stamps(tmp_path: Path, offset: float) -> None:
    log = tmp_path / "train.log"
    headless = _headless(tmp_path, log)
    writer = None
    err = ""
    try:
        # The watcher starts first: the log does not exist yet.
        err = wait_for_notice(headless, "to appear")
        writer = _writer(tmp_path, log, offset, 12, 0.15, 1, 1, unbuffered=True)
        writer.wait(timeout=30)
        ended = time.monotonic()  # the traceback is the last thing written
        wall_ended = time.time()
        alerts = _alerts(headless, ended + 6.0, stop=lambda a: a["detector"] == "crash")
        crashes = [a for a in alerts if a["detector"] == "crash"]
        assert crashes, f"no crash alert while headless runs (stamps {offset:+.0f} s off): {alerts}"
        latency = crashes[0]["_seen"] - ended
        print(f"offset {offset:+.0f} s: crash alert {latency:.2f} s after the log went quiet")
        assert latency < 2.0, f"crash alert took {latency:.2f} s"
        # A live alert's time is the wall clock (CONTRACTS section 2).
        assert abs(crashes[0]["time"] - wall_ended) < 5.0, (crashes[0]["time"], wall_ended)
        assert not [a for a in alerts if a["detector"] == "stall"]
    finally:
        err += _stop(*(p for p in (writer, headless) if p is not None))
    said = [line for line in err.splitlines() if "log stamps run" in line]
    if offset:
        assert len(said) == 1, err
        assert ("behind" if offset < 0 else "ahead of") in said[0]
        if abs(offset) >= 3600:
            assert "--tz" in said[0]
    else:
        assert not said, err


@pytest.mark.slow
def test_attached_to_a_running_log_two_hours_behind(tmp_path: Path) -> None:
    """The run started first; the watcher attaches to its log mid-run (its
    history read on the log's own clock), says the skew once, and the
    crash that ends the run is an alert at once, timed on the wall clock."""
    log = tmp_path / "train.log"
    writer = _writer(tmp_path, log, -7200.0, 90, 0.15, 1, 1, unbuffered=True)
    headless = None
    err = ""
    try:
        time.sleep(1.0)
        headless = _headless(tmp_path, log)
        err = wait_for_notice(headless, "log stamps run", timeout=12.0)
        assert writer.poll() is None, "the run ended before the watcher followed it"
        writer.wait(timeout=30)
        ended = time.monotonic()
        wall_ended = time.time()
        alerts = _alerts(headless, ended + 6.0, stop=lambda a: a["detector"] == "crash")
        crashes = [a for a in alerts if a["detector"] == "crash"]
        assert crashes, alerts
        latency = crashes[0]["_seen"] - ended
        print(f"attached, stamps 2 h behind: crash alert {latency:.2f} s after the log went quiet")
        assert latency < 2.0, f"crash alert took {latency:.2f} s"
        assert abs(crashes[0]["time"] - wall_ended) < 5.0, (crashes[0]["time"], wall_ended)
    finally:
        err += _stop(*(p for p in (writer, headless) if p is not None))
    said = [line for line in err.splitlines() if "log stamps run" in line]
    assert len(said) == 1 and "2 h 00 min behind" in said[0], err


_FAST_STALL = '[detectors]\nstall_min_s = 1.0\nstall_factor = 3.0\nstall_first_s = 2.0\n'


def _await(path: Path, what: str, timeout: float = 60.0) -> None:
    """Wait for one of the writer's marks (bounded: a loaded machine is slow, not stuck)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"the writer never {what}"
        time.sleep(0.02)


def _no_stall_between_bursts_and_the_hang_caught(tmp_path: Path, log: Path, headless: subprocess.Popen[str]) -> None:
    """Follow the buffered writer's bursts until it printed every line (its
    ``.done`` mark: on a loaded machine its sleeps overrun, so no fixed
    time), then its hang: no stall while bursts kept coming, one within
    three burst intervals of the last burst."""
    growth: list[float] = []
    size = 0
    alerts: list[dict] = []
    done = tmp_path / "writer.py.done"
    deadline = time.monotonic() + 90.0
    finished = False
    while not finished:
        finished = done.exists()  # every burst is in the file once it says so: one more look
        assert time.monotonic() < deadline, "the writer never finished"
        alerts += _alerts(headless, time.monotonic() + 0.1)
        now_size = log.stat().st_size if log.exists() else 0
        if now_size != size:
            size = now_size
            growth.append(time.monotonic())
    assert len(growth) >= 3, f"the writer was expected to write in bursts: {growth}"
    healthy = [a for a in alerts if a["detector"] == "stall" and a["_seen"] < growth[-1] + 0.5]
    intervals = [b - a for a, b in zip(growth, growth[1:])]
    interval = sorted(intervals)[len(intervals) // 2]
    assert interval > 1.5, f"not bursts: {intervals}"
    assert not healthy, f"a stall while bursts kept coming (every {interval:.1f} s): {healthy}"
    # The hang: no burst after the last one. Caught within three intervals
    # (lines without stamps are dated as they arrive: their usual step
    # interval is the burst interval, and stall_factor is 3), and the
    # watcher's poll and tick on a loaded machine.
    limit = 3 * interval + 2.0
    alerts += _alerts(headless, growth[-1] + limit, stop=lambda a: a["detector"] == "stall")
    stalls = [a for a in alerts if a["detector"] == "stall" and a["state"] == "firing"]
    assert stalls, f"the hang was not caught within 3 burst intervals ({interval:.1f} s)"
    print(f"bursts every {interval:.1f} s; stall {stalls[0]['_seen'] - growth[-1]:.1f} s after the last one")
    assert stalls[0]["_seen"] - growth[-1] <= limit


def _said_buffered_once(err: str) -> None:
    said = [line for line in err.splitlines() if "block-buffered" in line]
    assert len(said) == 1, err
    assert "python -u" in said[0] and "PYTHONUNBUFFERED=1" in said[0]


@pytest.mark.slow
@pytest.mark.parametrize("pace", [0.1, 0.06], ids=["bursts-4s", "bursts-2.5s"])
@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "print-only"])
def test_a_buffered_log_has_no_stall_between_bursts_and_a_hang_is_caught(
    tmp_path: Path, stamped: bool, pace: float
) -> None:
    """A healthy run whose stdout is block-buffered: a line every ``pace``
    s, written in ~8 KiB bursts (about 45 lines: 4.5 s or 2.7 s apart).
    With a stall limit of one second its bursts would each look like a
    stall; they are no stall (the first inter-burst gap too: the first
    burst must teach the interval), the buffering is said once, and when
    the run hangs (no more bursts) the stall still fires within three
    burst intervals."""
    log = tmp_path / "train.log"
    config = tmp_path / "dflash-watch.toml"
    config.write_text(_FAST_STALL)
    headless = _headless(tmp_path, log, "--config", str(config))
    writer = None
    err = ""
    try:
        # The watcher follows before the run starts (on a loaded machine
        # it takes seconds to start: the first burst would else be read
        # as history, the next test starts the watcher after the run).
        err = wait_for_notice(headless, "to appear")
        writer = _writer(tmp_path, log, 0, int(16.0 / pace), pace, int(stamped), 0, unbuffered=False)
        _no_stall_between_bursts_and_the_hang_caught(tmp_path, log, headless)
    finally:
        err += _stop(*(p for p in (writer, headless) if p is not None))
    _said_buffered_once(err)


@pytest.mark.slow
@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "print-only"])
def test_a_watcher_started_after_a_buffered_run_learns_the_bursts_from_the_first(tmp_path: Path, stamped: bool) -> None:
    """``python train.py > log &``, the watcher started seconds later: the
    first burst holds lines written before the watcher began, and comes
    soon after it began. It is a burst: the gap to the second is no stall
    (with a one-second limit, bursts ~2.4 s apart).

    Stamped, its stamps span more than the watch (as history appended at
    once does), but its newest line was written as it came. The run starts
    slowly (a line every 0.6 s, under the limit: no silence in its stamps)
    until the watcher follows, then writes a line every 0.06 s; its first
    ~40 lines fill the buffer, 8 s or more of them before the watch.
    Without stamps, the first burst's steps come at once, under a second
    after the watch began: the run holds its 46th line (of ~50 that fill
    the buffer) until the watcher follows."""
    log = tmp_path / "train.log"
    config = tmp_path / "dflash-watch.toml"
    config.write_text(_FAST_STALL)
    slow, hold = (0.6, 0) if stamped else (0.0, 46)
    writer = _writer(tmp_path, log, 0, 200, 0.06, int(stamped), 0, slow, hold, unbuffered=False)
    begun = time.monotonic()
    headless = None
    err = ""
    try:
        if hold:
            _await(tmp_path / "writer.py.held", "held its first lines")
        else:
            # 8 s old, at least: more than its first burst's stamps could
            # span in a watch this short.
            time.sleep(max(0.0, begun + 8.0 - time.monotonic()))
        # ``ready.log`` never comes: its notice says the watcher follows.
        headless = _headless(tmp_path, log, "--config", str(config), "--log", str(tmp_path / "ready.log"))
        err = wait_for_notice(headless, "to appear")
        assert not log.stat().st_size, "the first burst came before the watcher followed the log"
        (tmp_path / "writer.py.go").touch()
        _no_stall_between_bursts_and_the_hang_caught(tmp_path, log, headless)
    finally:
        err += _stop(*(p for p in (writer, headless) if p is not None))
    _said_buffered_once(err)


@pytest.mark.slow
def test_gpu_samples_on_the_wall_clock_open_no_stall_beside_a_lagging_log(tmp_path: Path) -> None:
    """GPU samples are stamped on this machine's clock, the log 10 min
    behind it: the samples must not run the stall's clock past the log's
    steps (today "no progress for 2 min", then "resumed after 0 s")."""
    log = tmp_path / "train.log"
    samples = tmp_path / "gpu.jsonl"
    samples.write_text("")
    config = tmp_path / "dflash-watch.toml"
    # A 4 s limit: the samples run 10 min ahead of the log without the
    # offset, so any limit below that fires; a second of scheduling delay
    # on a loaded machine must not.
    config.write_text('[detectors]\nstall_min_s = 4.0\nstall_factor = 3.0\nstall_first_s = 4.0\n')
    headless = _headless(tmp_path, log, "--config", str(config), "--gpu-samples", str(samples))
    writer = None
    try:
        time.sleep(1.0)
        writer = _writer(tmp_path, log, -600.0, 60, 0.15, 1, 0, unbuffered=True)
        def sample() -> str:
            line = {"time": time.time(), "gpu": 0, "used_bytes": 30 * 2**30, "total_bytes": 80 * 2**30}
            return json.dumps(line) + "\n"

        _no_stall_beside(headless, writer, samples, sample, 9.0)
    finally:
        _stop(*(p for p in (writer, headless) if p is not None))


@pytest.mark.slow
@pytest.mark.parametrize("side", ["gpu-samples", "probe"])
def test_side_files_on_the_wall_clock_open_no_stall_beside_an_attached_lagging_log(tmp_path: Path, side: str) -> None:
    """Attached to a log already running 10 min behind: the live clock
    follows the log's own, and GPU samples or probe lines stamped on this
    machine's clock must be moved onto it, not run the stall's clock 10
    min past the steps (the watcher began after the log, so it never saw a
    fresh chunk it could learn the log's offset from before the samples)."""
    log = tmp_path / "train.log"
    side_file = tmp_path / ("gpu.jsonl" if side == "gpu-samples" else "dflash-probe-rank0.jsonl")
    side_file.write_text("")
    config = tmp_path / "dflash-watch.toml"
    config.write_text('[detectors]\nstall_min_s = 4.0\nstall_factor = 3.0\nstall_first_s = 4.0\n')
    writer = _writer(tmp_path, log, -600.0, 100, 0.15, 1, 0, unbuffered=True)
    headless = None
    try:
        deadline = time.monotonic() + 20.0
        while (not log.exists() or log.stat().st_size < 2000) and time.monotonic() < deadline:
            time.sleep(0.1)
        flag = "--gpu-samples" if side == "gpu-samples" else "--probe"
        headless = _headless(tmp_path, log, "--config", str(config), flag, str(side_file))
        end = time.monotonic() + 9.0
        alerts: list[dict] = []
        step = 0
        with open(side_file, "a", encoding="utf-8") as fh:
            while time.monotonic() < end:
                step += 1
                if side == "gpu-samples":
                    line = {"time": time.time(), "gpu": 0, "used_bytes": 30 * 2**30, "total_bytes": 80 * 2**30}
                else:
                    line = {"time": time.time(), "rank": 0, "step": step, "tokens": 4000, "padded_tokens": 4096}
                fh.write(json.dumps(line) + "\n")
                fh.flush()
                alerts += _alerts(headless, time.monotonic() + 0.25)
        assert writer.poll() is None, "the writer ended early: the test saw no live run"
        assert headless.poll() is None, "headless exited"
        stalls = [a for a in alerts if a["detector"] == "stall"]
        assert not stalls, stalls
    finally:
        _stop(*(p for p in (writer, headless) if p is not None))



@pytest.mark.slow
def test_a_log_ten_minutes_behind_beside_a_log_on_the_wall_clock_opens_no_stall(tmp_path: Path) -> None:
    """The log's own offset, on its own (no side file): the training log is
    stamped 10 min behind this machine's clock, a watchdog's log (another
    host's) on it. The live clock follows the latest data, the watchdog's:
    the training log's steps must be moved onto it, or they sit 10 min in
    the past and every heartbeat finds a silence of 10 min."""
    log, watchdog = tmp_path / "train.log", tmp_path / "watchdog.log"
    watchdog.write_text("")
    config = tmp_path / "dflash-watch.toml"
    config.write_text('[detectors]\nstall_min_s = 4.0\nstall_factor = 3.0\nstall_first_s = 4.0\n')
    headless = _headless(tmp_path, log, "--config", str(config), "--log", str(watchdog))
    writer = None
    try:
        wait_for_notice(headless, "to appear")
        writer = _writer(tmp_path, log, -600.0, 60, 0.15, 1, 0, unbuffered=True)
        def heartbeat() -> str:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S") + f",{int(time.time() * 1000) % 1000:03d}"
            return f"{stamp} - INFO - watchdog - heartbeat: still at step 1, waiting in all_reduce\n"

        _no_stall_beside(headless, writer, watchdog, heartbeat, 8.0)
    finally:
        _stop(*(p for p in (writer, headless) if p is not None))


# torchrun's shape: its banner is the one stamped line (glog), the ranks'
# prints after it are not; the traceback ends the log.
BANNER_THEN_PRINTS = textwrap.dedent(
    """
    import datetime, sys, time
    log = open(sys.argv[1], "a")
    log.write(datetime.datetime.now().strftime("W%m%d %H:%M:%S.%f") + " 123 torch/distributed/run.py:874] "
              "Setting OMP_NUM_THREADS environment variable for each process to be 1\\n")
    log.flush()
    for i in range(1, int(sys.argv[2]) + 1):
        time.sleep(0.5)
        log.write(f"step {i} | loss {2.0 - i * 0.001:.4f}\\n")
        log.flush()
    print(time.time(), flush=True)
    log.write('Traceback (most recent call last):\\n  File "train.py", line 11, in <module>\\n'
              '    raise RuntimeError("boom")\\nRuntimeError: boom\\n')
    log.flush()
    """
)


@pytest.mark.slow
def test_a_crash_after_unstamped_prints_is_dated_when_it_was_written(tmp_path: Path) -> None:
    """The traceback after 12 s of unstamped prints carried the banner's
    stamp: its alert's time was 12 s (a day into a real run: a day) before
    it was written. Live it is dated no earlier than the lines before it."""
    log = tmp_path / "train.log"
    log.touch()
    headless = _headless(tmp_path, log)
    try:
        time.sleep(1.0)
        script = tmp_path / "writer.py"
        script.write_text(BANNER_THEN_PRINTS)
        written = float(subprocess.run([sys.executable, str(script), str(log), "24"], capture_output=True,
                                       text=True, env=_env(), timeout=60, check=True).stdout)
        crashes = alert_lines(headless, 15.0, lambda a: a["detector"] == "crash")
    finally:
        _stop(headless)
    (crash,) = [a for a in crashes if a["detector"] == "crash"]
    assert crash["state"] == "firing" and "RuntimeError: boom" in crash["message"]
    assert written - 1.0 <= crash["time"] <= crash["_seen"] + 0.5, (crash["time"] - written)
