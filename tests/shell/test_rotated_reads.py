"""Reading a rotated file has one home (``sources.rotated``): opening it as the
file that was listed (``open_as``), reading it on from a line (``Leftovers``),
and finding where its last line starts (``last_line_start``), which the live
attach of a followed name (``Follower.seek_to_last_line``) uses too.
"""

from __future__ import annotations

import os
from pathlib import Path

from dflash_watch.sources.follower import Follower
from dflash_watch.sources.leftovers import Leftovers
from dflash_watch.sources.logtail import Chunk, LogTailer
from dflash_watch.sources.rotated import Sibling, last_line_start, newest_from_its_end, open_as


def _ident(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def test_the_last_line_start_is_one_rule_for_the_name_and_a_rotated_copy(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"one\ntwo\nthree\nhalf a li")
    fd = os.open(log, os.O_RDONLY)
    try:
        assert last_line_start(fd, 4) == (14, 4)  # chunks smaller than a line: the same answer
        assert last_line_start(fd, 1 << 20) == (14, 4)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # the descriptor's offset is left alone
    finally:
        os.close(fd)
    follower = Follower(str(log), 1 << 20, 1 << 20, attach_at_end=True, announce=False)
    follower.fd = os.open(log, os.O_RDONLY)
    try:
        follower.seek_to_last_line(4)
        assert (follower.offset, follower.splitter.lineno, follower.tail) == (14, 4, b"one\ntwo\nthree\n")
        assert os.read(follower.fd, 100) == b"half a li"
    finally:
        follower.close_fd()
    # The same file renamed away by logrotate just now: read on from the same line.
    log.rename(tmp_path / "train.log.1")
    newest = newest_from_its_end(str(log), set(), {}, 4, watched_ns=os.stat(tmp_path / "train.log.1").st_ctime_ns)
    assert newest is not None and (newest.start, newest.lineno) == (14, 4)
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    fd = os.open(empty, os.O_RDONLY)
    try:
        assert last_line_start(fd, 4) == (0, 1)
    finally:
        os.close(fd)


def test_a_listed_file_whose_name_moved_on_is_not_opened_as_it(tmp_path: Path) -> None:
    first = tmp_path / "train.log.1"
    first.write_text("old\n")
    listed = _ident(first)
    fd = open_as(str(first), listed)
    assert fd is not None
    os.close(fd)
    keep = tmp_path / "keep"  # holds the old inode, so the new file cannot reuse its number
    os.link(first, keep)
    first.unlink()
    first.write_text("another file now\n")
    assert open_as(str(first), listed) is None
    assert open_as(str(tmp_path / "gone.log.2"), listed) is None
    # ``Leftovers`` skips it, reading and following alike.
    sib = Sibling(str(first), listed, 4, 0, 0, "1")
    got: list[object] = []
    left = Leftovers(1 << 20, 1 << 20)
    assert left.read_whole([sib], got.append) == ([], []) and got == []
    assert left.follow(sib, got.append) is None and got == [] and not left.renamed


def test_another_followed_file_is_never_read_as_a_rotated_copy(tmp_path: Path) -> None:
    """``train.log`` and ``train.log.1`` both followed (named, or a glob
    matching both): a relaunch that recreates ``train.log`` while ``.1``
    grows is not taken for a rotation, and ``.1``'s lines are read once,
    as its own."""
    log, other = tmp_path / "train.log", tmp_path / "train.log.1"
    log.write_text("a\n")
    other.write_text("x\n")
    with LogTailer([str(log), str(other)], use_watchdog=False) as tailer:
        tailer.poll()
        with other.open("a") as fh:
            fh.write("y\n")
        log.unlink()
        log.write_text("b\n")
        chunks = [c for c in tailer.poll() if isinstance(c, Chunk)]
    by_file: dict[str, str] = {}
    for c in chunks:
        by_file[c.path] = by_file.get(c.path, "") + c.text
    assert by_file == {str(other): "y\n", str(log): "b\n"}, by_file
