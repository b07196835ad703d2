"""A process that still holds a renamed log writes to it late.

Ranks that log to one file each open it; logrotate's ``create`` renames it
and one process is told to reopen (SIGHUP): the others go on writing to
the renamed file, perhaps only once more, much later (their traceback).
The tailer lets a quiet renamed file go (one descriptor a log, its
unfinished line ended once), then lists the copies every few seconds for
a while and reads one grown since, whatever its time (the name was
written after it): no rotation needed for the line to come."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dflash_watch.sources import leftovers, logtail, rotated
from dflash_watch.sources.logtail import Chunk, LogTailer


def _lines(items: list[object]) -> list[str]:
    return [line for i in items if isinstance(i, Chunk) and not i.partial for line in i.text.splitlines()]


def _polls(t: LogTailer, n: int = 4) -> list[str]:
    out: list[str] = []
    for _ in range(n):
        time.sleep(0.06)
        out += _lines(t.poll())
    return out


def test_a_straggler_in_a_renamed_file_let_go_is_read_without_a_rotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leftovers, "RENAMED_QUIET_S", 0.05)
    monkeypatch.setattr(logtail, "GROWN_EVERY_S", 0.05)
    log = tmp_path / "train.log"
    straggler = open(log, "a")  # noqa: SIM115 (a rank that is never told to reopen)
    read: list[str] = []
    try:
        with LogTailer([str(log)], use_watchdog=False) as t:
            straggler.write("rank1 step 1\n")
            straggler.flush()
            read += _lines(t.poll())
            # Three logrotate ``create`` rotations; rank 0 reopens the name after each.
            for n in range(3):
                for k in range(n, 0, -1):
                    os.rename(f"{log}.{k}", f"{log}.{k + 1}")
                os.rename(log, f"{log}.1")
                with open(log, "a") as rank0:
                    rank0.write(f"rank0 after rotation {n + 1}\n")
                read += _lines(t.poll()) + _polls(t)  # each renamed file goes quiet, and is let go
            assert len(os.listdir("/proc/self/fd")) < 64  # (one descriptor a log: nothing piles up)
            straggler.write("rank1 Traceback: CUDA error\n")  # to train.log.3, let go
            straggler.flush()
            time.sleep(0.02)
            with open(log, "a") as rank0:  # the name written after it: a later mtime
                rank0.write("rank0 step 9\n")
            read += _polls(t)
    finally:
        straggler.close()
    assert read.count("rank1 Traceback: CUDA error") == 1
    assert read.count("rank1 step 1") == 1
    assert read.count("rank0 step 9") == 1


def test_the_copies_are_listed_again_only_for_a_while_after_a_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing every few seconds is for files let go lately, not for good."""
    monkeypatch.setattr(leftovers, "RENAMED_QUIET_S", 0.05)
    monkeypatch.setattr(logtail, "GROWN_EVERY_S", 0.0)
    monkeypatch.setattr(logtail, "GROWN_WATCH_S", 0.3)
    listed = _counted_listings(monkeypatch)
    with LogTailer([str(tmp_path / "train.log")], use_watchdog=False) as t:
        _rotate_and_let_go(t, tmp_path / "train.log")
        time.sleep(0.35)
        _polls(t, 1)
        before = listed[0]
        _polls(t)
    assert listed[0] == before


def test_a_copy_read_before_that_grew_is_listed_whatever_its_time(tmp_path: Path) -> None:
    """The name written after the straggler's line: the copy's mtime is
    older than the last look's reading, yet it grew past what was read."""
    copy = tmp_path / "train.log.1"
    copy.write_text("step 1\n")
    fd = os.open(copy, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        left = leftovers.Leftovers(1 << 20, 1 << 20)
        left.done((os.fstat(fd).st_dev, os.fstat(fd).st_ino), fd, size, 2)
    finally:
        os.close(fd)
    with open(copy, "a") as straggler:
        straggler.write("Traceback: CUDA error\n")
    later = os.stat(copy).st_mtime_ns + 10**9  # the name's mtime at the last look: after the copy's
    found = rotated.fresh_siblings(str(tmp_path / "train.log"), later, set(), left.read)
    assert [(s.path, s.start, s.lineno) for s in found] == [(str(copy), size, 2)]
    os.utime(copy, ns=(later - 2 * 10**9, later - 2 * 10**9))
    assert rotated.fresh_siblings(str(tmp_path / "train.log"), later, set(), left.read)  # (older still)


def test_listing_for_files_let_go_slows_down_where_a_listing_costs_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All logs together stay under a share of a core: where one listing
    takes long (a folder of 50k files; here, a share made tiny), the next
    waits in proportion, however short ``GROWN_EVERY_S``."""
    monkeypatch.setattr(leftovers, "RENAMED_QUIET_S", 0.05)
    monkeypatch.setattr(logtail, "GROWN_EVERY_S", 0.0)
    with LogTailer([str(tmp_path / "train.log")], use_watchdog=False) as t:
        _rotate_and_let_go(t, tmp_path / "train.log")  # watching from now
        listed = _counted_listings(monkeypatch)
        _polls(t, 3)
        free = listed[0]
        monkeypatch.setattr(logtail, "_GROWN_SHARE", 1e-9)  # a listing now buys seconds of waiting
        _polls(t, 1)
        listed[0] = 0
        _polls(t, 5)
    assert free >= 3  # every look, while a listing is cheap
    assert listed[0] == 0


def _counted_listings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the tailer lists the copies from now on."""
    listed = [0]
    real = logtail.fresh_siblings

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        listed[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(logtail, "fresh_siblings", counted)
    return listed


def _rotate_and_let_go(t: LogTailer, log: Path) -> None:
    """A first look, then logrotate's ``create``: the renamed file goes
    quiet and is let go (``RENAMED_QUIET_S`` made short)."""
    log.write_text("step 1\n")
    t.poll()
    os.rename(log, f"{log}.1")
    log.write_text("step 2\n")
    _polls(t)
