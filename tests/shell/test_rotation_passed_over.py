"""Rotated copies passed over at a look (renamed again as they were opened
or listed: a RotatingFileHandler burst shifts every copy at each rollover)
wait for the listing again; the review of that change (dd03178) found what
it broke, each case here as its script showed it:

* a copy that cannot be opened where it is (a permission) is no pass-over:
  the newer copies are read, not held back and then lost;
* only a copy that would be read counts: a burst shifting the copies that
  were there at the first look holds nothing back;
* a look that passed one over after the held file was pruned is still a
  rotation (one generation, in order), not a new file;
* a look on the way to follow the newest copy (its writer still writes to
  it) follows it when it lists again, not reads it once;

and a hole read as NULs and filled later is not a copytruncate.

Files are real; the pass-over is injected where the race would put it, as
``test_rotated_listing.py`` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from rotating_writer import Writer

from dflash_watch.sources import leftovers, logtail, rotated
from dflash_watch.sources.logtail import Chunk, LogTailer, TailNotice


def _read(items: list[Chunk | TailNotice], gens: list[tuple[int, int]], notes: list[str]) -> None:
    for item in items:
        if isinstance(item, Chunk) and not item.partial:
            gens.extend((int(line.split()[1]), item.generation) for line in item.text.splitlines())
        elif isinstance(item, TailNotice):
            notes.append(item.kind)


def _three_rollovers(t: LogTailer, w: Writer, gens: list[tuple[int, int]], notes: list[str]) -> rotated.Ident:
    """The first look, then three rollovers before the next: .3 = gen0
    (held), .2 = gen1, .1 = gen2, the log gen3. Returns gen1's file."""
    _read(t.poll(), gens, notes)
    for _ in range(3):
        w.rollover()
    os.utime(w.log)
    st = os.stat(f"{w.log}.2")
    return (st.st_dev, st.st_ino)


def _passes_over_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next listing that finds copies passes its oldest over, as the
    last try does with one renamed yet again."""
    real = logtail.fresh_siblings
    left = [1]

    def flaky(abspath, since_ns, skip, read, history=None, missed=None):  # type: ignore[no-untyped-def]
        found = real(abspath, since_ns, skip, read, history, missed)
        if found and left[0] and missed is not None:
            left[0] -= 1
            missed.append(found[0].ident)
            return found[1:]
        return found

    monkeypatch.setattr(logtail, "fresh_siblings", flaky)


def test_a_copy_that_cannot_be_opened_holds_back_no_newer_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = Writer(tmp_path)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        bad = _three_rollovers(t, w, gens, notes)
        real = leftovers.open_as
        monkeypatch.setattr(leftovers, "open_as", lambda p, ident, suffix="": None if ident == bad else real(p, ident, suffix))
        for _ in range(6):
            _read(t.poll(), gens, notes)
    assert [g for g, _ in gens] == [0, 2, 3]  # gen1 cannot be read where it is; the rest is, in order
    assert "lost" not in notes


def test_copies_there_at_the_first_look_shifted_while_listed_hold_nothing_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = Writer(tmp_path)
    for _ in range(5):
        w.rollover()  # history: .1-.5 = gen0-4; the log is gen5
    real = os.stat

    def swap(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if os.path.basename(os.fspath(path)) in ("train.log.6", "train.log.7"):  # two old copies trade names
            os.rename(f"{w.log}.6", f"{w.log}.x")
            os.rename(f"{w.log}.7", f"{w.log}.6")
            os.rename(f"{w.log}.x", f"{w.log}.7")
        return real(path, *args, **kwargs)

    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        for _ in range(2):
            w.rollover()  # .2 = gen5 (held), .1 = gen6, log = gen7
        os.utime(w.log)
        monkeypatch.setattr(rotated.os, "stat", swap)
        for _ in range(4):
            _read(t.poll(), gens, notes)
        monkeypatch.undo()
        for _ in range(2):
            _read(t.poll(), gens, notes)
    assert [g for g, _ in gens] == [5, 6, 7]
    assert "lost" not in notes


def test_a_pruned_held_file_and_a_copy_passed_over_is_still_one_rotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = Writer(tmp_path, backup=2)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        for _ in range(3):
            w.rollover()  # gen0 pruned; .2 = gen1, .1 = gen2, log = gen3
        os.utime(w.log)
        _passes_over_once(monkeypatch)
        for _ in range(4):
            _read(t.poll(), gens, notes)
    assert gens == [(0, 0), (1, 0), (2, 0), (3, 0)]  # in order, one generation
    assert "recreated" not in notes and "deleted" not in notes


def test_the_newest_copy_passed_over_on_the_way_to_follow_it_is_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Watcher before the log; logrotate ``create`` renames it and makes a
    new one; the writer goes on writing to the renamed file until told."""
    log = tmp_path / "train.log"
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)  # waiting for it
        writer = open(log, "a")  # noqa: SIM115 (closed below)
        writer.write("gen 0\n")
        writer.flush()
        os.rename(log, f"{log}.1")
        log.touch()
        _passes_over_once(monkeypatch)
        _read(t.poll(), gens, notes)
        _read(t.poll(), gens, notes)
        writer.write("gen 1\n")  # still the renamed file
        writer.flush()
        for _ in range(3):
            _read(t.poll(), gens, notes)
        writer.close()
    assert "waiting" in notes
    assert [g for g, _ in gens] == [0, 1]


def test_a_hole_filled_after_it_was_read_is_no_copytruncate(tmp_path: Path) -> None:
    """A write that lands ahead of another (NFS, two writers without
    O_APPEND) leaves a hole read as NULs; filled later, nothing was
    truncated: the file is not read again from the start."""
    log = tmp_path / "train.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"step 0\n", 0)
        os.pwrite(fd, b"step 2\n", 14)  # step 1 (bytes 7-13) not landed yet
        with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
            items = t.poll()
            os.pwrite(fd, b"step 1\n", 7)
            items += t.poll() + t.poll()
    finally:
        os.close(fd)
    assert not [i for i in items if isinstance(i, TailNotice) and i.kind == "truncated"]
    assert sum(i.text.count("step 0") for i in items if isinstance(i, Chunk)) == 1


def test_a_pruned_held_file_mid_rollover_and_a_copy_passed_over_is_no_deletion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held file pruned while the name is missing (between a rollover's
    rename and its new file), and the listing passes a copy over: rotation,
    not a person's delete (one generation, in order)."""
    w = Writer(tmp_path, backup=2)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        for _ in range(2):
            w.rollover()  # .2 = gen0 (held), .1 = gen1, log = gen2
        os.unlink(f"{w.log}.2")  # a third rollover, stopped before its new file
        os.rename(f"{w.log}.1", f"{w.log}.2")
        os.rename(w.log, f"{w.log}.1")
        _passes_over_once(monkeypatch)
        _read(t.poll(), gens, notes)
        w.log.write_text("gen 3\n")
        for _ in range(3):
            _read(t.poll(), gens, notes)
    assert gens == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert "deleted" not in notes and "recreated" not in notes


def test_a_copy_renamed_again_at_every_look_is_said_and_holds_the_log_back_no_longer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy renamed again each time it is opened: the looks that may pass
    it over are few; the last reads what it can, says what it could not,
    and the name's lines come."""
    w = Writer(tmp_path)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        slippery = _three_rollovers(t, w, gens, notes)
        real = leftovers.open_as
        moves = [0]

        def renamed_each_time(path: str, ident: rotated.Ident, suffix: str = "") -> int | None:
            if ident == slippery:
                moves[0] += 1
                current = next(p for p in tmp_path.iterdir() if p.stat().st_ino == ident[1])
                os.rename(current, f"{w.log}.{50 + moves[0]}")
                return None
            return real(path, ident, suffix)

        monkeypatch.setattr(leftovers, "open_as", renamed_each_time)
        items: list[Chunk | TailNotice] = []
        for _ in range(8):
            items += t.poll()
        _read(items, gens, notes)
    assert [g for g, _ in gens] == [0, 2, 3]
    assert [i for i in items if isinstance(i, TailNotice) and "renamed again" in i.message]


def _rolls_over_first(monkeypatch: pytest.MonkeyPatch, w: Writer, times: int, nth: int = 1) -> None:
    """The ``nth`` listing from now finds ``times`` rollovers made just
    before it (a burst between a look's stat or open and its listing)."""
    real = logtail.fresh_siblings
    calls = [0]

    def rolled(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == nth:
            for _ in range(times):
                w.rollover()
        return real(*args, **kwargs)

    monkeypatch.setattr(logtail, "fresh_siblings", rolled)


def test_rollovers_between_the_stat_and_the_listing_keep_the_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name's file at the stat (gen1) is renamed by two rollovers before
    the listing: it is a copy older than the one made after it (gen2), read
    before it, not left out then followed after it (seen as 1 in 20-40
    runs of the burst writer, 6 at a time)."""
    assert _order_after(tmp_path, lambda w: _rolls_over_first(monkeypatch, w, 2)) == [0, 1, 2, 3]


def test_rollovers_between_the_open_and_the_listing_keep_the_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file just opened for the name (gen1) is renamed by two rollovers
    before the open's listing: the copy made after it (gen2) waits for the
    next look, after gen1 is read through its descriptor."""
    opened: list[list[int]] = []
    assert _order_after(tmp_path, lambda w: opened.append(_rolls_over_at_first_open(monkeypatch, w, 2))) == [0, 1, 2, 3]
    assert opened[0] == [1]


def _order_after(tmp_path: Path, rig: Callable[[Writer], object], *, let_go_first: bool = False) -> list[int]:
    """The generations read, in order: gen0 held, a rollover (the name gen1),
    ``rig`` set up, then three looks. ``let_go_first``: a rollover read and
    its renamed file let go before (the copies watched for it)."""
    w = Writer(tmp_path)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        if let_go_first:
            w.rollover()
            _read(t.poll(), gens, notes)
            _read(t.poll(), gens, notes)
            assert next(iter(t._followers.values())).left.let_go_at is not None
        w.rollover()
        rig(w)
        for _ in range(3):
            _read(t.poll(), gens, notes)
    return [g for g, _ in gens]


def _rolls_over_at_first_open(monkeypatch: pytest.MonkeyPatch, w: Writer, times: int) -> list[int]:
    """``times`` rollovers right after the tailer's first open of the name."""
    real_open = os.open
    opened = [0]

    def open_then_roll(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        fd = real_open(path, flags, *args, **kwargs)
        if os.fspath(path) == str(w.log) and not opened[0]:
            opened[0] += 1
            for _ in range(times):
                w.rollover()
        return fd

    monkeypatch.setattr(logtail.os, "open", open_then_roll)
    return opened


def test_a_first_open_renamed_before_its_listing_loses_no_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name missing at the first look, then made and opened, and two
    rollovers before the open's listing: the file opened is the oldest copy,
    read through its descriptor; gen1 is not taken for a renamed file to
    follow from its end (its text skipped), but read at the next look."""
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(tmp_path / "train.log")], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)  # waiting
        w = Writer(tmp_path)
        _rolls_over_at_first_open(monkeypatch, w, 2)
        for _ in range(4):
            _read(t.poll(), gens, notes)
    assert [g for g, _ in gens] == [0, 1, 2]


def test_the_watch_for_files_let_go_keeps_the_order_of_a_file_renamed_after_its_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same look lists the copies for a file let go (``_grown_due``) and
    the file just opened was renamed before: the copies after it wait."""
    _watch_every_look(monkeypatch)
    order = _order_after(tmp_path, lambda w: _rolls_over_at_first_open(monkeypatch, w, 2), let_go_first=True)
    assert order == [0, 1, 2, 3, 4]


def test_the_names_file_renamed_between_the_stat_and_the_listing_is_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """logrotate ``create`` twice in one poll, the second between the look's
    stat and its listing: the file the stat saw (X) is now a copy its writer
    still writes to (not yet HUP'd); it is followed, not read once."""
    log = tmp_path / "train.log"

    def create() -> int:
        return os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def rotate() -> int:
        os.rename(log, f"{log}.1")
        return create()

    writer = create()
    os.write(writer, b"gen 0\n")
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    made: list[int] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        fresh = rotate()
        os.close(writer)
        writer = fresh
        os.write(writer, b"gen 1\n")  # X
        real = logtail.fresh_siblings

        def raced(*args, **kwargs):  # type: ignore[no-untyped-def]
            if not made:
                made.append(rotate())  # the second rotation; the writer not told yet
            return real(*args, **kwargs)

        monkeypatch.setattr(logtail, "fresh_siblings", raced)
        _read(t.poll(), gens, notes)
        monkeypatch.undo()
        os.write(writer, b"gen 1 late\n")  # still into X, now train.log.1
        os.close(writer)
        writer = made[0]
        os.write(writer, b"gen 2\n")
        for _ in range(3):
            _read(t.poll(), gens, notes)
        os.close(writer)
    assert [g for g, _ in gens] == [0, 1, 1, 2]


def test_a_rotation_by_link_then_unlink_caught_between_reads_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rotation done as ``link(log, log.1)`` then ``unlink(log)``, the
    listing between the two: the name's file has two names; read once."""
    log = tmp_path / "train.log"
    log.write_text("gen 0\n")
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
        _renamed_once(t, log, gens, notes)
        real = logtail.fresh_siblings
        linked = [0]

        def raced(*args, **kwargs):  # type: ignore[no-untyped-def]
            if not linked[0]:
                linked[0] = 1
                os.rename(f"{log}.1", f"{log}.2")
                os.link(log, f"{log}.1")  # half a rotation
            return real(*args, **kwargs)

        monkeypatch.setattr(logtail, "fresh_siblings", raced)
        _read(t.poll(), gens, notes)
        monkeypatch.undo()
        os.unlink(log)
        log.write_text("gen 2\n")
        for _ in range(3):
            _read(t.poll(), gens, notes)
    assert [g for g, _ in gens] == [0, 1, 2]


def test_a_pruned_held_file_and_the_names_file_renamed_before_the_listing_is_one_rotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One copy kept: the held file pruned by a rollover after the stat
    (seen as pruned), which renamed the name's file too: a rotation (one
    generation, gen1 read), not a new file."""
    w = Writer(tmp_path, backup=1)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        w.rollover()  # .1 = gen0 (held), the name gen1
        from dflash_watch.sources.follower import Follower

        real = Follower.fstat
        rolled = [0]

        def fstat_after_a_rollover(self: Follower):  # type: ignore[no-untyped-def]
            if not rolled[0]:
                rolled[0] = 1
                w.rollover()  # gen0 pruned, .1 = gen1, the name gen2
            return real(self)

        monkeypatch.setattr(Follower, "fstat", fstat_after_a_rollover)
        for _ in range(3):
            _read(t.poll(), gens, notes)
    assert gens == [(0, 0), (1, 0), (2, 0)]
    assert "recreated" not in notes


def test_a_copy_pruned_unread_is_said_when_the_names_file_was_renamed_before_the_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One copy kept: the held file pruned before the look, and a rollover
    between its stat and its listing prunes gen1 unread. The list is cut at
    the name's file for reading; the loss is still told by all it holds."""
    w = Writer(tmp_path, backup=1)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        w.rollover()
        w.rollover()  # gen0 (held) pruned; .1 = gen1; the stat sees gen2
        _rolls_over_first(monkeypatch, w, 1)  # gen1 pruned unread; .1 = gen2; the name gen3
        for _ in range(3):
            _read(t.poll(), gens, notes)
    assert [g for g, _ in gens] == [0, 2, 3]
    assert notes.count("lost") == 1


def test_the_held_file_renamed_during_a_listing_is_no_copy_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch lists the copies at every look; the held file renamed again
    and again as they are listed (said passed over by the listing) is read
    through its descriptor: the name's lines are not held back, and nothing
    is said lost."""
    _watch_every_look(monkeypatch)
    w = Writer(tmp_path)
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(w.log)], from_start=True, use_watchdog=False) as t:
        _read(t.poll(), gens, notes)
        w.rollover()
        _read(t.poll(), gens, notes)
        _read(t.poll(), gens, notes)  # gen0 let go: the copies listed at every look
        held = next(iter(t._followers.values()))
        real = logtail.fresh_siblings

        def says_the_held_file_passed_over(*args, **kwargs):  # type: ignore[no-untyped-def]
            found = real(*args, **kwargs)
            missed = args[5] if len(args) > 5 else kwargs.get("missed")
            if missed is not None:
                missed.append(held.ident)
            return found

        monkeypatch.setattr(logtail, "fresh_siblings", says_the_held_file_passed_over)
        for k in range(6):
            with open(w.log, "a") as fh:
                fh.write(f"gen 1{k}\n")
            before = len(gens)
            _read(t.poll(), gens, notes)
            assert len(gens) == before + 1  # read at once
    assert "lost" not in notes


def test_a_copytruncate_copy_passed_over_is_not_read_by_the_same_looks_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """copytruncate while the copies are watched for a file let go: the
    truncation's listing passes its copy over (text read from the log
    itself), and the same look's watch must not read it as a new copy."""
    import shutil

    _watch_every_look(monkeypatch)
    log = tmp_path / "train.log"
    log.write_text("gen 0\n")
    gens: list[tuple[int, int]] = []
    notes: list[str] = []
    with LogTailer([str(log)], from_start=True, use_watchdog=False) as t:
        _renamed_once(t, log, gens, notes)  # a rename rotation first: its file let go, the watch on
        _read(t.poll(), gens, notes)
        _read(t.poll(), gens, notes)
        assert next(iter(t._followers.values())).left.let_go_at is not None
        os.rename(f"{log}.1", f"{log}.2")
        shutil.copyfile(log, f"{log}.1")  # copytruncate
        with open(log, "r+") as fh:
            fh.truncate(0)
        with open(log, "a") as fh:
            fh.write("gen 2\n")
        _passes_over_once(monkeypatch)
        for _ in range(3):
            _read(t.poll(), gens, notes)
    assert [g for g, _ in gens] == [0, 1, 2]


def _renamed_once(t: LogTailer, log: Path, gens: list[tuple[int, int]], notes: list[str]) -> None:
    """The first look (gen 0), then a rename rotation: the name holds gen 1."""
    _read(t.poll(), gens, notes)
    os.rename(log, f"{log}.1")
    log.write_text("gen 1\n")


def _watch_every_look(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renamed file is let go as soon as it is quiet, and the copies are
    then listed for it at every look (no pacing)."""
    monkeypatch.setattr(leftovers, "RENAMED_QUIET_S", 0.0)
    monkeypatch.setattr(logtail, "GROWN_EVERY_S", 0.0)
    monkeypatch.setattr(logtail, "_GROWN_SHARE", 1e9)
