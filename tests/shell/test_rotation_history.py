"""Rotated copies that were read before, or never need to be, are not read
again: after more rotations than the tailer remembers files read (dated
copies kept for good: TimedRotatingFileHandler's default ``backupCount=0``),
and the copies logrotate's ``copytruncate`` makes of text already read from
the log itself, when the log is later deleted and made anew (a relaunch)."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from dflash_watch.sources.logtail import Chunk, LogTailer, TailNotice


def _drain(t: LogTailer, lines: list[str], notes: list[str]) -> None:
    while items := t.poll():
        for item in items:
            if isinstance(item, Chunk) and not item.partial:
                lines.extend(item.text.splitlines())
            elif isinstance(item, TailNotice):
                notes.append(item.kind)


def test_more_rotations_than_files_remembered_read_each_copy_once(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("gen0 line\n")
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
        _drain(t, lines, notes)
        for i in range(1, 101):  # dated copies, never pruned
            os.rename(log, f"{log}.2026-01-01_{i:04d}")
            log.write_text(f"gen{i} line\n")
            _drain(t, lines, notes)
            time.sleep(0.002)
    assert [k for k, v in Counter(lines).items() if v > 1] == []
    assert lines == [f"gen{i} line" for i in range(101)]


def test_copytruncate_copies_are_not_read_again_when_the_log_is_made_anew(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("day0 a\n")
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
        _drain(t, lines, notes)
        for day in range(1, 4):  # logrotate copytruncate, then the writer goes on at once
            with log.open("a") as fh:
                fh.write(f"day{day - 1} b\n")
            _drain(t, lines, notes)
            shutil.copyfile(log, f"{log}.{day}")
            os.truncate(log, 0)
            with log.open("a") as fh:
                fh.write(f"day{day} a\n")
            _drain(t, lines, notes)
            time.sleep(0.2)
        log.unlink()  # the job is relaunched: a new log
        log.write_text("relaunch\n")
        _drain(t, lines, notes)
    assert lines == ["day0 a", "day0 b", "day1 a", "day1 b", "day2 a", "day2 b", "day3 a", "relaunch"]
    assert notes.count("truncated") == 3 and "recreated" in notes and "rotated" not in notes


def _rollover(log: Path, copies: int) -> None:
    """RotatingFileHandler's rename chain, stopped before the new file is made."""
    for k in range(copies, 0, -1):
        os.rename(f"{log}.{k}", f"{log}.{k + 1}")
    os.rename(log, f"{log}.1")


def test_copies_made_before_a_look_that_finds_the_name_missing_are_read_at_the_next(tmp_path: Path) -> None:
    """A look between a rollover's rename and the new file (the name
    missing) reads no rotated copy: those made before it are still new at
    the look that finds the name again (else lost: seen in CI as the burst
    test's missing records)."""
    log = tmp_path / "train.log"
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(log)], use_watchdog=False) as t:
        _drain(t, lines, notes)  # waiting for it
        log.write_text("a 1\n")
        _rollover(log, 0)
        log.write_text("b 1\n")
        _rollover(log, 1)  # .1 = b, .2 = a; the name missing
        time.sleep(0.05)
        _drain(t, lines, notes)  # a look that finds no file
        log.write_text("c 1\n")
        _drain(t, lines, notes)
        with log.open("a") as fh:
            fh.write("c 2\n")
        _rollover(log, 2)  # the held file renamed away
        log.write_text("d 1\n")
        _rollover(log, 3)  # d made and rolled over before any look saw it; the name missing
        time.sleep(0.05)
        _drain(t, lines, notes)  # a look that finds no file
        log.write_text("e 1\n")
        _drain(t, lines, notes)
    assert lines == ["a 1", "b 1", "c 1", "c 2", "d 1", "e 1"], (lines, notes)


def test_copytruncate_lines_written_after_the_last_read_are_read_from_the_copy(tmp_path: Path) -> None:
    """Lines written after the tailer's last read and before logrotate's
    copy and truncate are only in the copy: read from it, in their place."""
    log = tmp_path / "train.log"
    log.write_text("a\n")
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
        _drain(t, lines, notes)
        with log.open("a") as fh:
            fh.write("b\n")
        shutil.copyfile(log, f"{log}.1")
        os.truncate(log, 0)
        with log.open("a") as fh:
            fh.write("c after\n")
        _drain(t, lines, notes)
        log.unlink()  # and a relaunch: the copy is not read again
        log.write_text("d\n")
        _drain(t, lines, notes)
    assert lines == ["a", "b", "c after", "d"], (lines, notes)


def test_copytruncate_during_a_catch_up_loses_nothing(tmp_path: Path) -> None:
    """copytruncate while the tailer is still catching up a long backlog:
    the rest of the backlog is only in the copy."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i:05d}\n" for i in range(20000)))
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False, chunk_bytes=4096) as t:
        for item in t.poll():  # one poll: part of the backlog
            if isinstance(item, Chunk) and not item.partial:
                lines.extend(item.text.splitlines())
        assert 0 < len(lines) < 20000
        shutil.copyfile(log, f"{log}.1")
        os.truncate(log, 0)
        with log.open("a") as fh:
            fh.write("after\n")
        _drain(t, lines, notes)
    assert lines == [f"line {i:05d}" for i in range(20000)] + ["after"]


def test_a_folder_mtime_moved_ahead_hides_no_copy(tmp_path: Path) -> None:
    """The folder's mtime set ahead (another client's clock on a clustered
    filesystem, ``touch -d``, ``rsync -a``): copies are judged by the log's
    own times, and two rollovers between two looks are both read."""
    log = tmp_path / "train.log"
    log.write_text("a1\n")
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(log)], use_watchdog=False) as t:
        _drain(t, lines, notes)
        ahead = time.time() + 2
        os.utime(tmp_path, (ahead, ahead))
        _drain(t, lines, notes)
        _rollover(log, 0)
        log.write_text("b1\n")
        _rollover(log, 1)
        log.write_text("c1\n")
        _drain(t, lines, notes)
    assert lines == ["a1", "b1", "c1"], (lines, notes)


def test_a_log_a_glob_finds_after_it_rotated_is_read_from_its_first_copy(tmp_path: Path) -> None:
    """A glob's new log (a rank's) that rolled over before the tailer found
    it: its copies came after the first look, so they are read, oldest
    first, before the log itself. Copies that were there at the first look
    (an earlier run's) are still history, never read."""
    (tmp_path / "rank0.log").write_text("r0 line 1\n")
    (tmp_path / "rank1.log.1").write_text("old run of rank1\n")  # an earlier run's copy
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(tmp_path / "*.log")], from_start=False, use_watchdog=False) as t:
        _drain(t, lines, notes)
        log = tmp_path / "rank1.log"
        # rank1 appears and rolls over twice before the next look (.1 -> .2 first).
        log.write_text("r1 line 1\nr1 line 2\n")
        time.sleep(0.01)  # (a burst spans milliseconds: each file its own mtime)
        os.rename(tmp_path / "rank1.log.1", tmp_path / "rank1.log.2")
        os.rename(log, tmp_path / "rank1.log.1")
        os.rename(tmp_path / "rank1.log.2", tmp_path / "rank1.log.3")
        os.rename(tmp_path / "rank1.log.1", tmp_path / "rank1.log.2")
        log.write_text("r1 line 3\n")
        time.sleep(0.01)
        os.rename(log, tmp_path / "rank1.log.1")
        log.write_text("r1 line 4\n")
        _drain(t, lines, notes)
    assert [line for line in lines if line.startswith("r1") or "old" in line] == [
        "r1 line 1", "r1 line 2", "r1 line 3", "r1 line 4"
    ]
    assert "appeared" in notes


def test_a_log_in_a_folder_made_after_the_first_look_is_read_from_its_first_copy(tmp_path: Path) -> None:
    """The glob's folder part matches a folder made after the first look (a
    rank's run directory): everything in it is new, its rotated copies too."""
    (tmp_path / "run0").mkdir()
    (tmp_path / "run0" / "train.log").write_text("run0 line\n")
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([str(tmp_path / "*" / "train.log")], from_start=False, use_watchdog=False) as t:
        _drain(t, lines, notes)
        folder = tmp_path / "run1"
        folder.mkdir()
        log = folder / "train.log"
        log.write_text("run1 line 1\n")
        time.sleep(0.01)
        os.rename(log, folder / "train.log.1")
        log.write_text("run1 line 2\n")
        _drain(t, lines, notes)
    assert [line for line in lines if line.startswith("run1")] == ["run1 line 1", "run1 line 2"]


def test_an_earlier_runs_copies_stay_history_under_a_relative_recursive_glob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``**/*.log`` from the run's folder: '**' matches no folder as itself,
    yet the folder it starts from is noted at the first look; a log that
    appears there later does not read an earlier run's copies."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.log.1").write_text("old run copy 1\n")
    (tmp_path / "train.log.2").write_text("old run copy 2\n")
    lines = _lines_after("**/*.log", lambda: (tmp_path / "train.log").write_text("new run line 1\n"))
    assert lines == ["new run line 1"]


def test_an_earlier_runs_copies_stay_history_in_a_folder_renamed_since(tmp_path: Path) -> None:
    """The files noted at the first look go by what they are, not where:
    a run folder renamed since keeps its old copies as history."""
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "train.log.1").write_text("old run copy\n")

    def rerun() -> None:
        os.rename(tmp_path / "r1", tmp_path / "r1_done")
        (tmp_path / "r1_done" / "train.log").write_text("new run line 1\n")

    assert _lines_after(str(tmp_path / "*" / "train.log"), rerun) == ["new run line 1"]


def _lines_after(pattern: str, change: Callable[[], object]) -> list[str]:
    """The lines a live attach to ``pattern`` reads once ``change`` is made."""
    lines: list[str] = []
    notes: list[str] = []
    with LogTailer([pattern], from_start=False, use_watchdog=False) as t:
        _drain(t, lines, notes)
        change()
        _drain(t, lines, notes)
    return lines


def test_the_first_look_notes_only_files_that_could_be_a_matchs_copies(tmp_path: Path) -> None:
    """A glob's folder that holds data shards: only names that could be a
    rotated copy of a match (``*.log`` then ``.N``) are stat'ed and kept."""
    for i in range(200):
        (tmp_path / f"part-{i:04d}.arrow").write_text("x")
    (tmp_path / "rank0.log.1").write_text("old\n")
    (tmp_path / "rank0.log").write_text("now\n")
    with LogTailer([str(tmp_path / "*.log")], from_start=False, use_watchdog=False) as t:
        st = os.stat(tmp_path / "rank0.log.1")
        assert t._start_marks == {(st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)}
