"""No byte written to a followed log is lost across rotation (issue 17, "Rotation").

Real writers: Python logging with RotatingFileHandler / TimedRotatingFileHandler,
logrotate's ``create`` (rename, then a new file) and ``copytruncate`` done by
the writer process itself. The alerts are read from a real ``headless``.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from headless_helpers import alert_lines, wait_for_notice

from dflash_watch.monitor import Monitor
from dflash_watch.sources.logtail import Chunk, LogTailer, TailNotice

WRITER = textwrap.dedent('''
    import logging, logging.handlers, os, shutil, sys, time
    mode, path = sys.argv[1], sys.argv[2]
    log = logging.getLogger("train")
    log.setLevel(logging.INFO)
    fmt = logging.Formatter("%(asctime)s - %(levelname)s - %(name)s - %(message)s")
    if mode == "rfh":
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=2000, backupCount=3)
    else:
        handler = logging.FileHandler(path)
    handler.setFormatter(fmt)
    log.addHandler(handler)

    def reopen():  # what a writer does on logrotate's SIGHUP
        global handler
        log.removeHandler(handler)
        handler.close()
        handler = logging.FileHandler(path)
        handler.setFormatter(fmt)
        log.addHandler(handler)

    def progress(n):
        for i in range(n):
            log.info("step %d/1000 | loss 2.31 | 21.5 Ktok/s", i + 1)
            time.sleep(0.01)

    def crash():
        def inner():
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        try:
            inner()
        except RuntimeError:
            log.exception("training failed")

    progress(40)
    time.sleep(1.0)  # the watcher holds the file before it is rotated
    if mode == "rfh":
        # A fresh file with room for the traceback, held by the watcher by now.
        handler.doRollover()
        progress(3)
        time.sleep(1.5)
        crash()
        # One more record, larger than maxBytes: the handler rolls over first,
        # so the traceback is the last thing in the old file.
        log.info("shutting down " + "x" * 2000)
    elif mode == "create":
        # logrotate (create): rename, then a new empty file; the writer keeps
        # writing to the renamed file until it is told to reopen.
        os.rename(path, path + ".1")
        open(path, "w").close()
        time.sleep(1.5)  # the watcher has seen the new file by now
        progress(5)
        crash()
        time.sleep(0.3)
        reopen()
        log.info("reopened after rotation")
    elif mode == "copytruncate":
        crash()
        time.sleep(2.0)
        shutil.copy(path, path + ".1")
        os.truncate(path, 0)
        progress(5)
    time.sleep(float(sys.argv[3]))
''')


def _writer(tmp_path: Path, mode: str, log: Path, linger: float = 3.0) -> subprocess.Popen[str]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users do not set it
    return subprocess.Popen([sys.executable, str(script), mode, str(log), str(linger)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _headless(tmp_path: Path, log: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    return subprocess.Popen(
        [sys.executable, "-m", "dflash_watch.cli", "headless", "--no-gpu", "--log", str(log)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
    )


def _watch_writer(tmp_path: Path, mode: str) -> tuple[list[dict], str]:
    log = tmp_path / "train.log"
    proc = _headless(tmp_path, log)  # started first: the log does not exist yet
    early = ""
    try:
        early = wait_for_notice(proc, "to appear")
        writer = _writer(tmp_path, mode, log)
        alerts = alert_lines(proc, 12.0, lambda a: a["detector"] == "crash")
        writer.wait(timeout=20)
        assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    err = early + err
    assert proc.returncode == 0, err
    alerts += [json.loads(line) for line in out.splitlines()]
    return alerts, err


def _crashes(alerts: list[dict]) -> list[dict]:
    return [a for a in alerts if a["detector"] == "crash"]


@pytest.mark.slow
def test_rotating_file_handler_rolling_over_right_after_the_traceback_keeps_the_crash(tmp_path: Path) -> None:
    """3 of 3: the traceback ends train.log.1, one record starts the new train.log."""
    got = 0
    for attempt in range(3):
        run = tmp_path / f"try{attempt}"
        run.mkdir()
        alerts, err = _watch_writer(run, "rfh")
        old = (run / "train.log.1").read_text()
        assert old.startswith(time.strftime("%Y")) and "step 3/1000" in old  # held before the crash
        # The rollover came right after the traceback.
        assert old.rstrip().endswith("an illegal memory access was encountered")
        assert (run / "train.log").read_text().count("\n") == 1
        assert "rotated" in err
        crashes = _crashes(alerts)
        got += len(crashes) == 1 and crashes[0]["kind"] == "cuda_error"
    assert got == 3, f"crashes read across rotation: {got} of 3"


@pytest.mark.slow
def test_logrotate_create_keeps_what_the_writer_writes_to_the_renamed_file(tmp_path: Path) -> None:
    """Rename + a new empty file, and the writer logs its crash into the renamed
    file before it reopens the name (logrotate's SIGHUP comes later)."""
    alerts, err = _watch_writer(tmp_path, "create")
    assert "an illegal memory access" in (tmp_path / "train.log.1").read_text()
    assert (tmp_path / "train.log").read_text().startswith(time.strftime("%Y"))
    crashes = _crashes(alerts)
    assert [(a["kind"], a["state"]) for a in crashes] == [("cuda_error", "firing")], err


@pytest.mark.slow
def test_copytruncate_still_reads_from_the_start(tmp_path: Path) -> None:
    alerts, err = _watch_writer(tmp_path, "copytruncate")
    assert [a["kind"] for a in _crashes(alerts)] == ["cuda_error"], err
    assert "truncated" in err


# ---- the tailer alone: every line exactly once ------------------------------------


def _lines(items: list[Chunk | TailNotice]) -> list[str]:
    return [line for i in items if isinstance(i, Chunk) and not i.partial for line in i.text.splitlines()]


def _notices(items: list[Chunk | TailNotice], kind: str) -> list[TailNotice]:
    return [i for i in items if isinstance(i, TailNotice) and i.kind == kind]


def _logger(name: str, handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"rotation-test.{name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    return logger


def _drain(t: LogTailer, settle: float = 2.5) -> list[Chunk | TailNotice]:
    """Polls until the renamed files are let go (they are read on while they may grow)."""
    items: list[Chunk | TailNotice] = []
    end = time.monotonic() + settle
    while time.monotonic() < end:
        items += t.poll()
        time.sleep(0.1)
    return items + t.poll()


BURSTS = textwrap.dedent('''
    import logging, logging.handlers, random, sys, time
    log = logging.getLogger("w")
    log.setLevel(logging.INFO)
    h = logging.handlers.RotatingFileHandler(sys.argv[1], maxBytes=1500, backupCount=1000)
    h.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(h)
    rng = random.Random(17)
    n = 0
    for burst in range(40):
        for _ in range(rng.choice([1, 5, 40, 120])):  # up to ~8 rotations in one burst
            log.info("seq %06d %s", n, "." * rng.randrange(0, 60))
            n += 1
        time.sleep(rng.choice([0.0, 0.005, 0.05]))
    print(n)
''')


def test_every_line_once_across_many_rotations_in_bursts(tmp_path: Path) -> None:
    """A real RotatingFileHandler in another process, rolling over ~100 times in
    bursts (several rollovers between two polls): every record once, in order."""
    log = tmp_path / "train.log"
    script = tmp_path / "bursts.py"
    script.write_text(BURSTS)
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    with LogTailer([str(log)], use_watchdog=False) as t:
        items = t.poll()  # waiting for it
        writer = subprocess.Popen([sys.executable, str(script), str(log)], env=env,
                                  stdout=subprocess.PIPE, text=True)
        while writer.poll() is None:
            items += t.poll()
            time.sleep(0.03)
        items += _drain(t)
        written = int(writer.stdout.read()) if writer.stdout else 0
    rotations = len(list(tmp_path.glob("train.log.*")))
    got = [int(line.split()[1]) for line in _lines(items)]
    assert rotations > 30
    assert got == list(range(written)), f"{len(got)} lines read of {written} written; {_story(items, got)}"
    assert not _notices(items, "lost")


def _story(items: list[Chunk | TailNotice], got: list[int]) -> str:
    """Where the order first breaks and what the tailer said around it (its
    notices name each rotated file read): a flake seen once in CI in many
    runs (two files' lines swapped) must say which path read them."""
    at = next((i for i, n in enumerate(got) if n != i), None)
    if at is None:
        return "in order"
    story: list[str] = []
    seen = 0
    for item in items:
        if isinstance(item, TailNotice):
            story.append(f"[{item.kind}] {item.message}")
        elif not item.partial:
            first = seen
            seen += len(item.text.splitlines())
            story.append(f"lines {got[first] if first < len(got) else '?'}..{got[seen - 1] if seen else '?'}")
    where = next((k for k, line in enumerate(story) if line.startswith("lines") and str(got[at]) in line), 0)
    return f"line {at} read as {got[at]}: " + " | ".join(story[max(0, where - 12) : where + 12])


def test_several_rollovers_between_two_polls_are_read_oldest_first(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    handler = logging.handlers.RotatingFileHandler(log, maxBytes=100, backupCount=10)
    logger = _logger("several", handler)
    try:
        with LogTailer([str(log)], use_watchdog=False) as t:
            logger.info("first")
            assert _lines(t.poll()) == ["first"]
            for i in range(60):  # 600 bytes: five rollovers, no poll between
                logger.info("line %03d", i)
            items = _drain(t, 0.0)
    finally:
        handler.close()
    assert _lines(items) == [f"line {i:03d}" for i in range(60)]
    assert {i.generation for i in items if isinstance(i, Chunk)} == {0}  # one stream
    assert not _notices(items, "lost")


def test_rollovers_past_the_backup_count_say_the_loss_once(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    handler = logging.handlers.RotatingFileHandler(log, maxBytes=100, backupCount=2)
    logger = _logger("pruned", handler)
    try:
        with LogTailer([str(log)], use_watchdog=False) as t:
            logger.info("first")
            assert _lines(t.poll()) == ["first"]
            for burst in range(2):
                for i in range(60):  # each 10 lines rolls over; the kernel's file clock ticks between
                    logger.info("b%d line %03d", burst, i)
                    if i % 10 == 9:
                        time.sleep(0.03)
                items = _drain(t, 0.0)
                got = _lines(items)
                assert got == sorted(set(got))  # never twice, never out of order
                assert got[-10:] == [f"b{burst} line {i:03d}" for i in range(50, 60)]
                assert len(_notices(items, "lost")) == 1  # said once for all that was lost
                assert len(got) < 60
    finally:
        handler.close()


def test_log_that_rotates_before_the_first_poll_finds_it(tmp_path: Path) -> None:
    """Watcher first, then a run that rolls its log over at once."""
    log = tmp_path / "train.log"
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert [n.kind for n in t.poll() if isinstance(n, TailNotice)] == ["waiting"]
        handler = logging.handlers.RotatingFileHandler(log, maxBytes=100, backupCount=5)
        logger = _logger("early", handler)
        try:
            for i in range(25):
                logger.info("line %03d", i)
            items = _drain(t, 0.0)
        finally:
            handler.close()
    assert _lines(items) == [f"line {i:03d}" for i in range(25)]


def test_timed_rotating_handler_and_delete_recreate(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    handler = logging.handlers.TimedRotatingFileHandler(log, when="S", backupCount=5)
    logger = _logger("timed", handler)
    try:
        with LogTailer([str(log)], use_watchdog=False) as t:
            logger.info("a")
            assert _lines(t.poll()) == ["a"]
            logger.info("b")
            handler.doRollover()  # renamed to train.log.YYYY-MM-DD_HH-MM-SS
            logger.info("c")
            items = _drain(t, 0.0)
            assert _lines(items) == ["b", "c"]
            assert [n.kind for n in items if isinstance(n, TailNotice)] == ["rotated"]
            # deleted and created anew (a relaunch): a new generation, numbered from 1
            handler.close()
            log.unlink()
            log.write_text("run 2\n")
            items = _drain(t, 0.0)
            assert [(c.generation, c.first_lineno, c.text) for c in items if isinstance(c, Chunk)] == [
                (1, 1, "run 2\n")
            ]
    finally:
        handler.close()


def test_monitor_gets_the_crash_that_ended_the_rotated_file(tmp_path: Path) -> None:
    """The tailer's chunks into a real Monitor, as the live session feeds them."""
    log = tmp_path / "train.log"
    handler = logging.handlers.RotatingFileHandler(log, maxBytes=4000, backupCount=3)
    logger = _logger("monitor", handler)
    handler.setFormatter(logging.Formatter("%(asctime)s - %(levelname)s - %(message)s"))
    monitor = Monitor()
    alerts = []
    try:
        with LogTailer([str(log)], use_watchdog=False) as t:
            logger.info("step 1/10 | loss 2.0")
            items = t.poll()
            try:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            except RuntimeError:
                logger.exception("training failed")
            logger.info("shutting down %s", "x" * 4000)  # rolls over first
            for item in items + _drain(t, 0.0):
                if isinstance(item, Chunk) and not item.partial:
                    alerts += monitor.feed_text(item.path, item.text, item.first_lineno, time.time(),
                                                item.generation)
    finally:
        handler.close()
    old = (tmp_path / "train.log.1").read_text()
    assert "step 1/10" in old and old.rstrip().endswith("encountered")  # the file held, then rolled over
    assert [(a.detector, a.kind) for a in alerts + monitor.finish()] == [("crash", "cuda_error")]


def test_a_writer_that_keeps_the_renamed_file_is_read_there(tmp_path: Path) -> None:
    """logrotate's create mode with a writer that reopens late, or never: what it
    writes to the renamed file is read, and read once, even after letting it go."""
    log = tmp_path / "train.log"
    with open(log, "a") as old_writer, LogTailer([str(log)], use_watchdog=False) as t:
        old_writer.write("a\n")
        old_writer.flush()
        assert _lines(t.poll()) == ["a"]
        os.rename(log, tmp_path / "train.log.1")
        log.touch()  # logrotate: create
        assert [n.kind for n in t.poll() if isinstance(n, TailNotice)] == ["rotated"]
        time.sleep(2.3)  # quiet past the grace: still followed, the new file is empty
        assert t.poll() == []
        old_writer.write("b\n")
        old_writer.flush()
        assert _lines(t.poll()) == ["b"]
        with open(log, "a") as new_writer:  # SIGHUP: the writer reopens the name
            new_writer.write("c\n")
            new_writer.flush()
            assert _lines(t.poll()) == ["c"]
            time.sleep(2.3)
            assert t.poll() == []  # the renamed file is let go
            old_writer.write("d\n")  # a straggler writes to it after all
            old_writer.flush()
            os.rename(tmp_path / "train.log.1", tmp_path / "train.log.2")  # the next rotation
            os.rename(log, tmp_path / "train.log.1")
            log.touch()
            new_writer.write("e\n")
            new_writer.flush()
            items = _drain(t, 0.0)
    # The held file's tail first, then the straggler found in the older file.
    assert _lines(items) == ["e", "d"]


@pytest.mark.parametrize("how", ["copytruncate", "delete"])
def test_a_new_generation_right_after_the_traceback_keeps_the_crash(tmp_path: Path, how: str) -> None:
    """Truncated or deleted and created anew (a relaunch, `> log`) before the log
    went quiet: the tailer starts a new generation (a new run may begin), and the
    traceback the old one ended with must still become a crash."""
    log = tmp_path / "train.log"
    log.write_text("2026-11-29 10:00:00,000 - INFO - step 1/10 | loss 2.0\n")
    monitor = Monitor()
    alerts = []
    with LogTailer([str(log)], use_watchdog=False) as t:
        items = t.poll()
        with open(log, "a") as fh:
            fh.write("2026-11-29 10:00:01,000 - ERROR - training failed\n"
                     "Traceback (most recent call last):\n"
                     '  File "train.py", line 3, in <module>\n'
                     "RuntimeError: CUDA error: an illegal memory access was encountered\n")
        items += t.poll()
        if how == "copytruncate":
            os.truncate(log, 0)
        else:
            log.unlink()
        log.write_text("2026-11-29 10:00:02,000 - INFO - step 1/10 | loss 2.0\n")
        items += t.poll()
    assert {i.generation for i in items if isinstance(i, Chunk)} == {0, 1}
    for item in items:
        if isinstance(item, Chunk) and not item.partial:
            alerts += monitor.feed_text(item.path, item.text, item.first_lineno, time.time(), item.generation)
    assert [(a.detector, a.kind) for a in alerts + monitor.finish()] == [("crash", "cuda_error")]
