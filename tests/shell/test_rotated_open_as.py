"""``open_as``: a rotated copy listed under one name and renamed again
before it is opened (a RotatingFileHandler shifts every copy at each
rollover) is opened under its new name among the log's copies, so that the
copies are read in the listing's order; one that is gone, or kept only
under a name outside the family, is None."""

from __future__ import annotations

import os
from pathlib import Path

from dflash_watch.sources.rotated import open_as


def _ident(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


def test_a_copy_renamed_since_it_was_listed_is_opened_under_its_new_name(tmp_path: Path) -> None:
    listed = tmp_path / "train.log.1"
    listed.write_text("seq 1\n")
    ident = _ident(listed)
    os.rename(listed, tmp_path / "train.log.2")  # the next rollover
    listed.write_text("seq 9\n")  # the name now holds a newer copy
    fd = open_as(str(listed), ident, "1")
    assert fd is not None
    try:
        assert os.read(fd, 100) == b"seq 1\n"
    finally:
        os.close(fd)


def test_a_copy_that_is_gone_is_none(tmp_path: Path) -> None:
    listed = tmp_path / "train.log.3"
    listed.write_text("seq 1\n")
    ident = _ident(listed)
    listed.unlink()  # pruned (backupCount)
    assert open_as(str(listed), ident, "3") is None


def test_a_copy_kept_only_outside_the_family_is_not_taken(tmp_path: Path) -> None:
    listed = tmp_path / "train.log.1"
    listed.write_text("seq 1\n")
    ident = _ident(listed)
    os.link(listed, tmp_path / "keep")
    listed.unlink()
    assert open_as(str(listed), ident, "1") is None
