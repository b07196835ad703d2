"""The rotated copies of a log listed while a writer rolls over, again and
again, between the listing and each copy's ``stat`` (a RotatingFileHandler
in a burst): every copy once, oldest first, by the numbers of one moment.

Copies rotated within one clock tick carry the same mtime and are told
apart by their numbers only; a number read after the next rollover (the
name .2 stat'ed once it holds what was .1) names another file. Seen once
in CI as two rotated files read in swapped order
(tests/shell/test_rotation.py's burst test)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from rotating_writer import Writer

from dflash_watch.sources import leftovers, rotated
from dflash_watch.sources.rotated import fresh_siblings, open_as


def _gens(found: list[rotated.Sibling]) -> list[int]:
    out = []
    for s in found:
        fd = open_as(s.path, s.ident, s.suffix)
        assert fd is not None, s
        try:
            out.append(int(os.read(fd, 100).split()[1]))
        finally:
            os.close(fd)
    return out


def _rolling_stat(writer: Writer, every: int, rollovers: int) -> Callable[..., os.stat_result]:
    """``os.stat`` that rolls the log over before every ``every``-th stat of
    a copy, ``rollovers`` times (a burst, then quiet)."""
    real = os.stat
    calls = [0]
    left = [rollovers]

    def stat(path: str | os.PathLike[str], *args: object, **kwargs: object) -> os.stat_result:
        if os.path.basename(os.fspath(path)).startswith("train.log."):
            if left[0] and calls[0] % every == 0:
                writer.rollover()
                left[0] -= 1
            calls[0] += 1
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    return stat


@pytest.mark.parametrize("every,rollovers", [(1, 3), (1, 8), (2, 8), (3, 12), (5, 30)])
def test_copies_renamed_while_listed_come_once_oldest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            every: int, rollovers: int) -> None:
    writer = Writer(tmp_path)
    for _ in range(5):
        writer.rollover()
    monkeypatch.setattr(rotated.os, "stat", _rolling_stat(writer, every, rollovers))
    found = fresh_siblings(str(writer.log), 0, set(), {})
    monkeypatch.undo()
    gens = _gens(found)
    assert len(set(s.ident for s in found)) == len(found), gens  # no copy twice
    assert gens == sorted(gens), gens  # oldest first
    assert gens[0] == 0  # the oldest, never renamed away unseen
    assert len(gens) >= 5


def test_a_copy_renamed_on_every_try_is_said_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename storm outlasting every try of the listing: each copy there
    before it that the answer lacks is said passed over (``missed``: the
    tailer lists again), never dropped unsaid."""
    writer = Writer(tmp_path)
    for _ in range(5):
        writer.rollover()
    before = {(s.st_dev, s.st_ino) for s in (os.stat(f"{writer.log}.{k}") for k in range(1, 6))}
    monkeypatch.setattr(rotated.os, "stat", _rolling_stat(writer, 1, 100))
    missed: list[rotated.Ident] = []
    found = fresh_siblings(str(writer.log), 0, set(), {}, None, missed)
    monkeypatch.undo()
    dropped = before - {s.ident for s in found}
    assert dropped and dropped <= set(missed), (dropped, missed)


def test_a_quiet_folder_lists_every_copy_oldest_first(tmp_path: Path) -> None:
    writer = Writer(tmp_path)
    for _ in range(12):  # .1 .. .12: ten and more sort apart from their text
        writer.rollover()
    live = os.stat(writer.log)
    found = fresh_siblings(str(writer.log), 0, {(live.st_dev, live.st_ino)}, {})
    assert _gens(found) == list(range(12))
    assert [s.suffix for s in found] == [str(k) for k in range(12, 0, -1)]


def test_a_copy_listed_under_two_names_is_taken_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder read in several ``getdents`` calls across a rename (.2 -> .3
    between them), or a hard link: one file under two names in one listing."""
    writer = Writer(tmp_path)
    for _ in range(3):
        writer.rollover()
    ino = {k: os.stat(f"{writer.log}.{k}").st_ino for k in (1, 2, 3)}
    torn = [("train.log.1", ino[1]), ("train.log.2", ino[3]), ("train.log.3", ino[3])]
    monkeypatch.setattr(rotated, "_snapshot", lambda folder, base: torn)
    found = fresh_siblings(str(writer.log), 0, set(), {})
    idents = [s.ident for s in found]
    assert len(idents) == len(set(idents)) == 2


def test_a_listing_that_numbers_files_otherwise_than_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FUSE without ``use_ino`` (sshfs, s3fs): the folder's listing gives
    each file a number that is not its ``stat`` inode. Every copy is still
    found, oldest first, also while the writer rolls over."""
    writer = Writer(tmp_path)
    for _ in range(6):
        writer.rollover()
    real = rotated._snapshot

    def fuse(folder: str, base: str) -> list[tuple[str, int]] | None:
        listed = real(folder, base)
        return None if listed is None else [(name, ino + 10**9) for name, ino in listed]

    monkeypatch.setattr(rotated, "_snapshot", fuse)
    assert _gens(fresh_siblings(str(writer.log), 0, set(), {})) == list(range(6))
    monkeypatch.setattr(rotated.os, "stat", _rolling_stat(writer, 4, 2))
    found = fresh_siblings(str(writer.log), 0, set(), {})
    monkeypatch.undo()
    gens = _gens(found)
    assert gens == sorted(gens) and len(set(gens)) == len(gens) and gens[0] == 0, gens


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("where", ["open", "listing"])
def test_a_copy_passed_over_at_a_look_is_read_at_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, times: int
) -> None:
    """A copy still there but renamed again as the tailer opened it (or
    renamed yet again on the listing's last try) is passed over at that
    look. It and the newer copies wait for the listing again (the same
    look's, when the name's new file is opened, or the next look's: the
    look does not move the tailer's reading of the files' clock past it),
    so every copy is read once and in order: not after a newer one (seen
    once in CI), nor never. ``times``: passed over at both listings of the
    look (the rotation's, and the new file's), read at the next look."""
    from dflash_watch.sources.logtail import Chunk, LogTailer

    writer = Writer(tmp_path)
    read: list[int] = []

    def drain(items: list[object]) -> None:
        for item in items:
            if isinstance(item, Chunk) and not item.partial:
                read.extend(int(line.split()[1]) for line in item.text.splitlines())

    with LogTailer([str(writer.log)], from_start=True, use_watchdog=False) as t:
        drain(t.poll())
        for _ in range(3):  # between two looks: gen 1 and gen 2 are copies never held
            writer.rollover()
        os.utime(writer.log)  # the name written after the copies: a later mtime
        passed = [0]
        if where == "open":
            real_open_as = leftovers.open_as

            def flaky_open(path: str, ident: rotated.Ident, suffix: str = "") -> int | None:
                if passed[0] < times:
                    passed[0] += 1
                    # Renamed again as it was opened (to a number no rollover uses here).
                    os.rename(path, f"{writer.log}.{50 + passed[0]}")
                    return None
                return real_open_as(path, ident, suffix)

            monkeypatch.setattr(leftovers, "open_as", flaky_open)
        else:
            from dflash_watch.sources import logtail

            real_fresh = logtail.fresh_siblings

            def flaky_listing(abspath, since_ns, skip, read_, history=None, missed=None):  # type: ignore[no-untyped-def]
                found = real_fresh(abspath, since_ns, skip, read_, history, missed)
                if found and passed[0] < times and missed is not None:
                    passed[0] += 1
                    missed.append(found[0].ident)  # as the listing's last try says of one renamed yet again
                    return found[1:]
                return found

            monkeypatch.setattr(logtail, "fresh_siblings", flaky_listing)
        drain(t.poll())
        assert passed[0] == times
        monkeypatch.undo()
        for _ in range(3):
            drain(t.poll())
    # Listed again by the same look when the new file is opened, or (twice)
    # at the next look, the name's new lines waiting for them: once, in order.
    assert read == list(range(writer.gen))


def test_a_copy_that_cannot_be_opened_where_it_is_is_said_and_the_log_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy still under its name that no open succeeds on (a permission)
    is no pass-over: it is said, once, and the rest is read (not held back
    look after look)."""
    from dflash_watch.sources.logtail import Chunk, LogTailer, TailNotice

    writer = Writer(tmp_path)
    with LogTailer([str(writer.log)], from_start=True, use_watchdog=False) as t:
        t.poll()
        for _ in range(2):
            writer.rollover()
        os.utime(writer.log)
        monkeypatch.setattr(leftovers, "open_as", lambda path, ident, suffix="": None)
        items: list[object] = []
        for _ in range(8):
            items += t.poll()
        said = [i for i in items if isinstance(i, TailNotice) and "cannot be opened" in i.message]
        assert len(said) == 1 and said[0].kind == "error"
        assert [c.text for c in items if isinstance(c, Chunk) and not c.partial] == ["gen 2\n"]
        with open(writer.log, "a") as fh:
            fh.write("gen 9\n")
        assert [c.text for c in t.poll() if isinstance(c, Chunk) and not c.partial] == ["gen 9\n"]


def test_many_logs_in_one_folder_share_one_listing_at_their_first_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A glob of 200 ranks' logs in a folder of other files: their first
    looks (each one's history) take one listing of the folder, not one each,
    and each finds the same copies a listing of its own finds."""
    for i in range(2000):
        (tmp_path / f"shard-{i:05d}.arrow").write_text("x")
    for r in range(200):
        (tmp_path / f"rank{r}.log").write_text(f"rank {r}\n")
        if r % 3 == 0:
            (tmp_path / f"rank{r}.log.1").write_text(f"old {r}\n")
    from dflash_watch.sources.logtail import LogTailer

    real = rotated.os.scandir
    listed = [0]

    def counted(path):  # type: ignore[no-untyped-def]
        listed[0] += 1
        return real(path)

    monkeypatch.setattr(rotated.os, "scandir", counted)
    with LogTailer([str(tmp_path / "rank*.log")], from_start=False, use_watchdog=False) as t:
        t.poll()
        first_looks = listed[0]
        monkeypatch.undo()
        for f in t._followers.values():
            assert f.history == rotated.sibling_marks(f.abspath)
        assert sum(len(f.history) for f in t._followers.values()) == 67
    assert first_looks <= 3  # (the glob's folder noted once, the shared listing; not 200)
