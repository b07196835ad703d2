"""`headless` and `check` as a user meets them: real processes, real files.

headless is the live session of `watch` without a screen (CONTRACTS
section 1): alerts as JSON lines on stdout the moment they fire, notices
on stderr, SIGTERM/SIGINT emit what is pending and exit 0. check is one
look: exit 0 healthy, 1 alerts firing, 2 could not check.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEP = "2026-11-29 10:00:{s:02d},000 - INFO - dflash.train - step {n}/1000 | loss 2.31 | 21.5 Ktok/s\n"
TRACEBACK = (
    "[rank3]: Traceback (most recent call last):\n"
    '[rank3]:   File "/opt/dflash/train.py", line 412, in <module>\n'
    "[rank3]:     main()\n"
    '[rank3]:   File "/opt/dflash/train.py", line 398, in main\n'
    "[rank3]:     loss = model(batch)\n"
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dflash_watch.cli", *args]


def _headless(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _cli("headless", "--no-gpu", *args),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
    """One stdout line within ``timeout`` (the process keeps running)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else None


def _steps(n: int) -> str:
    return "".join(STEP.format(s=i % 60, n=i + 1) for i in range(n))


def _first_alert_after_attach(tmp_path: Path, log: Path) -> dict[str, object]:
    """The first alert line of a headless attached to ``log``, which must
    come within 8 s of the attach while it runs (not at its SIGTERM)."""
    attached = time.monotonic()
    proc = _headless(tmp_path, "--log", str(log))
    try:
        line = _read_line(proc, 10.0)
        latency = time.monotonic() - attached
        assert line, "no alert line while headless runs"
        assert latency < 8.0, f"attach to alert took {latency:.2f} s"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    alert: dict[str, object] = json.loads(line)
    return alert


@pytest.mark.slow
def test_a_traceback_that_ends_a_quiet_log_is_an_alert_line_at_once(tmp_path: Path) -> None:
    """The usual crash: the traceback is the last thing in the log, then silence.
    Its alert is on stdout within a second or two, not when headless stops."""
    log = tmp_path / "train.log"
    log.write_text(_steps(20))
    proc = _headless(tmp_path, "--log", str(log))
    try:
        time.sleep(1.5)  # attached and caught up
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(TRACEBACK)
        wrote = time.monotonic()
        line = _read_line(proc, 5.0)
        latency = time.monotonic() - wrote
        assert line, "no alert line while headless runs"
        alert = json.loads(line)
        assert (alert["detector"], alert["kind"], alert["state"]) == ("crash", "cuda_oom", "firing")
        assert "rank 3" in alert["message"] or alert["evidence"].get("ranks") == [3]
        assert latency < 2.0, f"crash line to alert took {latency:.2f} s"
        assert proc.poll() is None  # still watching
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


@pytest.mark.slow
def test_a_log_that_ended_in_a_traceback_long_ago_is_an_alert_soon_after_attach(tmp_path: Path) -> None:
    """Coming back to a run that died days ago: its log opens with a tqdm
    bar drawn before the first record (no stamp: dated by the wall clock
    while it is caught up), then stamped steps, then the traceback. The
    crash is on stdout within seconds of the attach, not when headless
    stops (the bar's wall-clock time ran the crash detector's hold ahead of
    the data's clock, by as long as the log was old)."""
    log = tmp_path / "train.log"
    log.write_text("Training:   0%|          | 0/1000 [00:00<?, ?it/s]\n" + _steps(20) + TRACEBACK)
    old = time.time() - 3 * 86400
    os.utime(log, (old, old))
    alert = _first_alert_after_attach(tmp_path, log)
    assert (alert["detector"], alert["kind"], alert["state"]) == ("crash", "cuda_oom", "firing")


@pytest.mark.slow
def test_a_log_silent_for_hours_before_the_attach_is_a_stall_at_once(tmp_path: Path) -> None:
    """A run that hung (or was killed without a word) hours before anyone
    looked: its log's last write is its mtime. Attached, the stall is on
    stdout within seconds, dated when the threshold passed hours ago, as
    ``check`` says it; not one threshold (minutes) after the attach, as if
    the silence began when the watcher did."""
    log = tmp_path / "train.log"
    last = time.time() - 3 * 3600
    first = last - 299
    stamps = [time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(first + i)) for i in range(300)]
    log.write_text("".join(f"{s},000 - INFO - dflash.train - step {i + 1}/1000 | loss 2.31 | 21.5 Ktok/s\n"
                           for i, s in enumerate(stamps)))
    os.utime(log, (last, last))
    alert = _first_alert_after_attach(tmp_path, log)
    assert (alert["detector"], alert["state"]) == ("stall", "firing")
    assert alert["time"] < last + 3600, "dated at the attach, not when the silence passed the threshold"


@pytest.mark.slow
def test_sigterm_emits_what_is_pending_and_exits_0(tmp_path: Path) -> None:
    """A crash still held back (to merge the other ranks' copies) is sent on SIGTERM."""
    log = tmp_path / "train.log"
    log.write_text(_steps(5))
    proc = _headless(tmp_path, "--log", str(log))
    time.sleep(1.5)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(TRACEBACK)
    # Before the log can be judged quiet: SIGTERM at once.
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    alerts = [json.loads(line) for line in out.splitlines()]
    assert [(a["detector"], a["kind"]) for a in alerts] == [("crash", "cuda_oom")]


@pytest.mark.slow
def test_sigint_exits_0_and_notices_go_to_stderr(tmp_path: Path) -> None:
    proc = _headless(tmp_path, "--log", str(tmp_path / "not-yet.log"))
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out == ""  # stdout holds alert lines only
    assert "not-yet.log" in err and "Traceback" not in err


def test_headless_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\n")
    out = subprocess.run(_cli("headless", "--config", str(bad)), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def _check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cli("check", *args), cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_check_exit_codes_healthy_firing_and_could_not_check(tmp_path: Path) -> None:
    # Healthy: a run that finished (its last step is its total) is not stalled
    # however long ago it ended.
    done = tmp_path / "done.log"
    done.write_text("".join(STEP.format(s=i, n=i + 1).replace("/1000", "/10") for i in range(10)))
    out = _check(tmp_path, "--log", str(done))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "healthy" in out.stdout

    crashed = tmp_path / "crashed.log"
    crashed.write_text(_steps(10) + TRACEBACK)
    out = _check(tmp_path, "--log", str(crashed), "--json")
    assert out.returncode == 1, out.stdout + out.stderr
    alerts = [json.loads(line) for line in out.stdout.splitlines()]
    assert ("crash", "cuda_oom", "firing") in [(a["detector"], a["kind"], a["state"]) for a in alerts]

    out = _check(tmp_path, "--log", str(tmp_path / "missing.log"))
    assert out.returncode == 2
    assert "could not check" in out.stderr and len(out.stderr.strip().splitlines()) == 1

    out = _check(tmp_path, "--log", str(tmp_path / "nothing*.log"))
    assert out.returncode == 2 and "no file matches" in out.stderr


def test_check_judges_the_silence_up_to_now(tmp_path: Path) -> None:
    """A run whose log stopped mid-run long ago is stalled now, not healthy.
    Its silence is how long ago it was last written: the file's mtime is set
    to its last stamp, as a writer that stopped then left it (a file made
    now is fresh, whatever its stamps say: ``check`` reads stamps hours off
    this machine's clock as the log's own clock, test_bad_input)."""
    import datetime as dt

    stalled = tmp_path / "stalled.log"
    text = _steps(30)
    stalled.write_text(text)
    last = dt.datetime.strptime(text.splitlines()[-1][:19], "%Y-%m-%d %H:%M:%S").timestamp()
    os.utime(stalled, (last, last))
    out = _check(tmp_path, "--log", str(stalled))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "stall" in out.stdout


def test_check_reads_globs_in_order(tmp_path: Path) -> None:
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.log").write_text(
            "".join(STEP.format(s=i, n=i + 1).replace("/1000", "/10") for i in range(10))
        )
    (tmp_path / "rank1.log").write_text((tmp_path / "rank1.log").read_text() + TRACEBACK)
    out = _check(tmp_path, "--log", str(tmp_path / "rank*.log"), "--json")
    assert out.returncode == 1
    assert [json.loads(line)["source"].split(":")[0] for line in out.stdout.splitlines()] == ["rank1.log"]


def test_headless_and_watch_share_one_session_builder() -> None:
    """One code path: a fix to one is a fix to both."""
    import inspect

    from dflash_watch.commands import headless, watch

    assert "build_live" in inspect.getsource(headless.run)
    assert "build_live" in inspect.getsource(watch.run)
    assert os.path.exists(ROOT / "dflash_watch" / "commands" / "live_setup.py")


def test_tokens_per_step_from_the_config_turns_it_per_s_into_tokens(tmp_path: Path) -> None:
    """A run printing only it/s, with `[run] tokens_per_step`, is judged in tokens/s:
    a tokens/s baseline file applies to it."""
    from dflash_watch.monitor import Monitor
    from dflash_watch.parsers.events import Progress

    monitor = Monitor(tokens_per_step=4096.0)
    monitor.feed_events([Progress(100.0, "l:1", step=1, rate=5.0, rate_unit="it/s")])
    last = monitor.last_progress
    assert last is not None and last.tokens_per_s == 5.0 * 4096 and last.rate_unit == "tok/s"
    # Without the key the run keeps its own unit.
    plain = Monitor()
    plain.feed_events([Progress(100.0, "l:1", step=1, rate=5.0, rate_unit="it/s")])
    assert plain.last_progress is not None and plain.last_progress.tokens_per_s is None
    # From a config file, through the command line (the key loads and is range-checked).
    cfg = tmp_path / "dflash-watch.toml"
    cfg.write_text("[run]\ntokens_per_step = -1\n")
    out = _check(tmp_path, "--config", str(cfg), "--log", str(tmp_path / "x.log"))
    assert out.returncode == 2 and "tokens_per_step" in out.stderr


@pytest.mark.slow
def test_check_of_a_job_that_exited_cleanly_is_healthy(tmp_path: Path, tmux_socket: str) -> None:
    """A job in tmux that logged its steps and exited 0: ``check --session``
    shows the clean exit (an info alert) and says healthy, exit 0; a cron
    job's check paged on every finished run (exit 1)."""
    log = tmp_path / "train.log"
    steps = "".join(f"step {i}/5 | loss 0.5 | 20.0 Ktok/s\\n" for i in range(1, 6))
    cmd = f"{sys.executable} -c \"import sys; sys.stdout.write('{steps}')\" > {log} 2>&1"
    job = ["--session", "clean", "--socket", tmux_socket, "--cwd", str(tmp_path)]
    started = subprocess.run(_cli("start", *job, "--cmd", cmd), cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 30
    while True:
        out = _check(tmp_path, "--log", str(log), *job)
        if "exited cleanly" in out.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "INFO" in out.stdout and "exited cleanly" in out.stdout, out.stdout + out.stderr
    assert out.returncode == 0, out.stdout + out.stderr
    assert "healthy: only information firing" in out.stdout
