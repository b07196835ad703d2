"""A rollover between the tailer's first look and its first poll.

``LogTailer`` looks at the named logs when it is made (their copies then
are history) and reads them at its first poll. A rollover in between used
to lose the text: a renamed file was not held yet, so its text went with
it (``RotatingFileHandler``'s rename, logrotate's ``create``), and a file
truncated under offset 0 (``copytruncate``) looked like a file that had
just begun. Attached at the end, the lines written in between were taken
for history. The named log is now held from the first look, as ``tail -F``
holds it, and a file smaller than when it was opened was truncated.

Real files and the standard library's own ``RotatingFileHandler``; the
window is opened by doing the rollover right after the tailer is made.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import shutil
from pathlib import Path

import pytest

from dflash_watch.sources.logtail import Chunk, LogTailer


def _lines(tailer: LogTailer, polls: int = 3) -> list[str]:
    got: list[str] = []
    for _ in range(polls):
        for item in tailer.poll():
            if isinstance(item, Chunk):
                got += item.text.splitlines()
    return got


def _handler_log(path: Path, max_bytes: int) -> tuple[logging.Logger, logging.Handler]:
    log = logging.getLogger(f"attach-{path}")
    log.propagate = False
    log.setLevel(logging.INFO)
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=5)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    return log, handler


@pytest.mark.parametrize("from_start", [True, False])
def test_a_rotating_file_handler_rolls_over_before_the_first_poll(tmp_path: Path, from_start: bool) -> None:
    path = tmp_path / "train.log"
    log, handler = _handler_log(path, max_bytes=200)
    try:
        for i in range(5):
            log.info("before %d", i)
        tailer = LogTailer([str(path)], from_start=from_start, use_watchdog=False)
        try:
            # Lines until the handler rolls over, then more in the new file.
            size = path.stat().st_size
            i = 0
            while path.stat().st_size >= size:
                size = path.stat().st_size
                log.info("late %d", i)
                i += 1
            assert (tmp_path / "train.log.1").exists()
            for j in range(4):
                log.info("after %d", j)
            got = _lines(tailer)
        finally:
            tailer.close()
    finally:
        log.removeHandler(handler)
        handler.close()
    late = [f"late {k}" for k in range(i)]
    after = [f"after {j}" for j in range(4)]
    before = [f"before {k}" for k in range(5)] if from_start else []
    assert got == before + late + after


@pytest.mark.parametrize("from_start", [True, False])
@pytest.mark.parametrize("how", ["rename", "copytruncate"])
def test_logrotate_before_the_first_poll(tmp_path: Path, from_start: bool, how: str) -> None:
    """logrotate's ``create`` (rename, then a new file) and ``copytruncate``
    (copy, then truncate in place), each between the first look and the
    first poll, with lines written before and after it."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"before {i}\n" for i in range(5)))
    tailer = LogTailer([str(path)], from_start=from_start, use_watchdog=False)
    try:
        with open(path, "a") as fh:
            fh.write("".join(f"late {i}\n" for i in range(3)))
        if how == "rename":
            os.rename(path, tmp_path / "train.log.1")
            path.write_text("")
        else:
            shutil.copy(path, tmp_path / "train.log.1")
            with open(path, "r+") as fh:
                fh.truncate(0)
        with open(path, "a") as fh:
            fh.write("".join(f"after {i}\n" for i in range(4)))
        got = _lines(tailer)
    finally:
        tailer.close()
    before = [f"before {i}" for i in range(5)] if from_start else []
    assert got == before + [f"late {i}" for i in range(3)] + [f"after {i}" for i in range(4)]


def test_a_log_only_grown_before_the_first_poll_is_read_once(tmp_path: Path) -> None:
    """No rollover: held from the first look, the log is read as before
    (from its start, or from the first look's end), each line once."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"before {i}\n" for i in range(5)))
    for from_start in (False, True):  # (the second finds the first's line there)
        tailer = LogTailer([str(path)], from_start=from_start, use_watchdog=False)
        try:
            with open(path, "a") as fh:
                fh.write(f"late {int(from_start)}\n")
            got = _lines(tailer)
        finally:
            tailer.close()
        before = [f"before {i}" for i in range(5)] + (["late 0"] if from_start else [])
        assert got == (before if from_start else []) + [f"late {int(from_start)}"]


def _open_fds_on(path: Path) -> int:
    """This process's descriptors open on ``path`` (Linux: /proc/self/fd)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith(str(path))
        except OSError:
            continue
    return n


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")
def test_a_log_named_twice_is_opened_once(tmp_path: Path) -> None:
    """``--log x --log x``: one follower, one descriptor, and attached at
    the end no history read (a second open would start it over)."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"history {i}\n" for i in range(3)))
    tailer = LogTailer([str(path), str(path), os.path.join(str(tmp_path), ".", "train.log")], from_start=False,
                       use_watchdog=False)
    try:
        assert _open_fds_on(path) == 1
        with open(path, "a") as fh:
            fh.write("new 0\n")
        assert _lines(tailer) == ["new 0"]
    finally:
        tailer.close()
    assert _open_fds_on(path) == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")
def test_a_first_open_that_fails_leaves_no_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read error at the first look (a failing network mount, here made
    so): the error comes out of the constructor, and the files it opened
    are closed (no tailer comes back to close them)."""
    from dflash_watch.sources.follower import Follower

    path = tmp_path / "train.log"
    path.write_text("line\n")

    def failing(self: Follower, chunk: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Follower, "seek_to_last_line", failing)
    for _ in range(3):
        with pytest.raises(OSError):
            LogTailer([str(path)], from_start=False, use_watchdog=True)
    assert _open_fds_on(path) == 0


@pytest.mark.parametrize("append", [True, False])
def test_a_copytruncate_refilled_past_its_size_before_the_first_poll(tmp_path: Path, append: bool) -> None:
    """copytruncate, then the name back to more than it held when opened
    before the first poll: by a writer with O_APPEND (new lines from 0), or
    one without, which goes on at its old offset and leaves a NUL hole.
    Nothing read yet, the first bytes as opened tell: the copy's lines are
    read, then the new ones, and no line of NULs."""
    path = tmp_path / "train.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0), 0o644)
    try:
        os.write(fd, b"".join(b"old %d\n" % i for i in range(10)))
        tailer = LogTailer([str(path)], use_watchdog=False)
        try:
            shutil.copy(path, tmp_path / "train.log.1")
            os.truncate(path, 0)
            os.write(fd, b"".join(b"new %d\n" % i for i in range(12)))
            got = _lines(tailer)
        finally:
            tailer.close()
    finally:
        os.close(fd)
    assert got == [f"old {i}" for i in range(10)] + [f"new {i}" for i in range(12)]


def test_a_copytruncate_left_empty_is_said_once(tmp_path: Path) -> None:
    """Truncated before the first poll and still empty at the polls after:
    one 'truncated', the copy read once, then the new lines."""
    from dflash_watch.sources.logtail import TailNotice

    path = tmp_path / "train.log"
    path.write_text("".join(f"old {i}\n" for i in range(10)))
    tailer = LogTailer([str(path)], use_watchdog=False)
    try:
        shutil.copy(path, tmp_path / "train.log.1")
        os.truncate(path, 0)
        items = [item for _ in range(4) for item in tailer.poll()]
        with open(path, "a") as fh:
            fh.write("new 0\n")
        items += tailer.poll()
    finally:
        tailer.close()
    truncated = [i for i in items if isinstance(i, TailNotice) and i.kind == "truncated"]
    lines = [line for i in items if isinstance(i, Chunk) for line in i.text.splitlines()]
    assert len(truncated) == 1
    assert lines == [f"old {i}" for i in range(10)] + ["new 0"]
