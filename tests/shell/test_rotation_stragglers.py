"""A process that still holds a renamed log writes to it late.

Ranks that log to one file each open it; logrotate's ``create`` renames it
and one process is told to reopen (SIGHUP): the others go on writing to
the renamed file, perhaps only once more, hours later (their traceback).
The tailer keeps the newest quiet renamed files open and reads such a line
as it comes; one pushed out by newer ones is found grown at the next
listing, whatever its time (the name was written after it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dflash_watch.sources import rotated
from dflash_watch.sources.logtail import Chunk, LogTailer


def _lines(items: list[object]) -> list[str]:
    return [line for i in items if isinstance(i, Chunk) and not i.partial for line in i.text.splitlines()]


def _quiet_polls(t: LogTailer) -> list[object]:
    items: list[object] = []
    for _ in range(3):
        time.sleep(0.06)
        items += t.poll()
    return items


def test_a_straggler_in_an_old_renamed_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rotated, "RENAMED_QUIET_S", 0.05)
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
                read += _lines(t.poll())
                read += _lines(_quiet_polls(t))  # each renamed file goes quiet
            # The straggler's file (train.log.3 now) was pushed out by two newer quiet ones.
            straggler.write("rank1 Traceback: CUDA error\n")
            straggler.flush()
            time.sleep(0.02)
            with open(log, "a") as rank0:  # the name written after it: a later mtime
                rank0.write("rank0 step 9\n")
            read += _lines(t.poll())
            # The next rotation lists the copies: the straggler's file grew since it was let go.
            os.rename(f"{log}.3", f"{log}.4")
            os.rename(f"{log}.2", f"{log}.3")
            os.rename(f"{log}.1", f"{log}.2")
            os.rename(log, f"{log}.1")
            log.touch()
            read += _lines(t.poll()) + _lines(_quiet_polls(t))
    finally:
        straggler.close()
    assert read.count("rank1 Traceback: CUDA error") == 1
    assert read.count("rank1 step 1") == 1
    assert "rank0 step 9" in read


def test_a_straggler_in_the_newest_renamed_files_is_read_as_it_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rotated, "RENAMED_QUIET_S", 0.05)
    log = tmp_path / "train.log"
    straggler = open(log, "a")  # noqa: SIM115
    try:
        with LogTailer([str(log)], use_watchdog=False) as t:
            straggler.write("rank1 step 1\n")
            straggler.flush()
            assert _lines(t.poll()) == ["rank1 step 1"]
            os.rename(log, f"{log}.1")
            with open(log, "a") as rank0:
                rank0.write("rank0 step 2\n")
            assert _lines(t.poll()) == ["rank0 step 2"]
            assert _lines(_quiet_polls(t)) == []  # quiet: still followed
            straggler.write("rank1 Traceback: CUDA error\n")
            straggler.flush()
            assert _lines(t.poll()) == ["rank1 Traceback: CUDA error"]
    finally:
        straggler.close()
