"""LogTailer on real files: tail -F semantics driven through poll()."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.sources.logtail import Chunk, LogTailer, TailNotice, read_chunks

REALWORLD = Path(__file__).resolve().parents[2].parent / "shared" / "realworld"


def lines(items: list[Chunk | TailNotice]) -> list[tuple[str, int, int, str]]:
    """(path, generation, lineno, line) for every line in the chunks, checking the invariants."""
    res = []
    for item in items:
        if isinstance(item, Chunk) and not item.partial:
            assert item.text.endswith("\n")
            for i, line in enumerate(item.text.split("\n")[:-1]):
                res.append((item.path, item.generation, item.first_lineno + i, line))
    return res


def texts(items: list[Chunk | TailNotice]) -> list[str]:
    return [line for _, _, _, line in lines(items)]


def notices(items: list[Chunk | TailNotice], kind: str | None = None) -> list[TailNotice]:
    return [i for i in items if isinstance(i, TailNotice) and (kind is None or i.kind == kind)]


def open_files() -> list[str]:
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor listdir itself used
            pass
    return held


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "train.log"


def test_waits_for_missing_file_then_reads_it(log: Path) -> None:
    with LogTailer([str(log)], use_watchdog=False) as t:
        first = t.poll()
        assert [n.kind for n in notices(first)] == ["waiting"]
        assert "train.log" in first[0].message
        assert t.poll() == []  # the waiting notice comes once
        log.write_bytes(b"step 1\nstep 2\n")
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["appeared"]
        assert lines(items) == [(str(log), 0, 1, "step 1"), (str(log), 0, 2, "step 2")]
        assert t.files == [str(log)]


def test_append_holds_partial_line_and_split_utf8(log: Path) -> None:
    log.write_bytes(b"a\nb")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["a"]
        snow = "❄".encode()  # 3 bytes, split across two writes
        append(log, b"c " + snow[:1])
        assert t.poll() == []
        append(log, snow[1:] + b" d\ne\n")
        items = t.poll()
        assert lines(items) == [(str(log), 0, 2, "bc ❄ d"), (str(log), 0, 3, "e")]
        assert "\ufffd" not in items[0].text


def test_rename_and_create_rotation(log: Path, tmp_path: Path) -> None:
    """Rename rotation goes on with the same writer's text: the old file's tail,
    then the new file from its line 1, all one generation (one parser stream,
    so a traceback that ended the old file is closed by the next record)."""
    log.write_bytes(b"1\n2\n")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["1", "2"]
        append(log, b"3\n4")  # written before rotation, read through the old descriptor
        rotated = tmp_path / "train.log.1"
        os.rename(log, rotated)
        append(rotated, b"\n")  # the writer finishes its line in the old file
        log.write_bytes(b"new 1\nnew 2\n")
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["rotated"]
        assert lines(items) == [
            (str(log), 0, 3, "3"),
            (str(log), 0, 4, "4"),
            (str(log), 0, 1, "new 1"),
            (str(log), 0, 2, "new 2"),
        ]
        # Rotation noticed in between: the old inode is still followed until the new one appears.
        rotated2 = tmp_path / "train.log.2"
        os.rename(log, rotated2)
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["rotated"]
        append(rotated2, b"late\n")
        assert lines(t.poll()) == [(str(log), 0, 3, "late")]
        log.write_bytes(b"gen2\n")
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["rotated"]
        assert lines(items) == [(str(log), 0, 1, "gen2")]
        # The renamed file is still read while its writer may hold it (logrotate's
        # create mode before the writer reopens): its late lines are not lost.
        append(rotated2, b"later\n")
        assert lines(t.poll()) == [(str(log), 0, 4, "later")]


def test_copytruncate_resets_numbering(log: Path) -> None:
    log.write_bytes(b"a\nb\nc\nhalf")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["a", "b", "c"]
        with open(log, "r+b") as fh:
            fh.truncate(0)
        append(log, b"x\n")
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["truncated"]
        # the old incarnation's unfinished line is closed off, then the new one starts at 1
        assert lines(items) == [(str(log), 0, 4, "half"), (str(log), 1, 1, "x")]


def test_copytruncate_with_non_append_writer_skips_nul_hole(log: Path) -> None:
    with open(log, "wb") as writer:  # like `python train.py > train.log`: not O_APPEND
        writer.write(b"one\ntwo\nthree\n")
        writer.flush()
        with LogTailer([str(log)], use_watchdog=False) as t:
            assert texts(t.poll()) == ["one", "two", "three"]
            os.truncate(log, 0)
            writer.write(b"four\n")  # lands at the old offset, leaving a hole of NULs
            writer.flush()
            items = t.poll()
            assert [n.kind for n in notices(items)] == ["truncated"]
            assert lines(items) == [(str(log), 1, 1, "four")]


@pytest.mark.parametrize("refill", [b"step 9 | loss 1.5\n", b"step 9 | loss 1.5\nstep 10 | loss 1.4\n"])
def test_copytruncate_refilled_to_our_offset_or_past_it_is_seen(log: Path, refill: bytes) -> None:
    """A fast writer refills a truncated log before the next look: to the
    very length read (the size tells nothing), or past it with a line
    ending where the read did (the byte before the offset is '\\n' again).
    The bytes before the offset tell: the new lines are read from line 1."""
    log.write_bytes(b"step 1 | loss 2.5\n")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["step 1 | loss 2.5"]
        with open(log, "r+b") as fh:
            fh.truncate(0)
        append(log, refill)
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["truncated"]
        assert lines(items)[0] == (str(log), 1, 1, "step 9 | loss 1.5")
        assert texts(items) == refill.decode().splitlines()


def test_delete_and_recreate(log: Path) -> None:
    log.write_bytes(b"run 1\n")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["run 1"]
        append(log, b"last words")
        os.unlink(log)
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["deleted"]
        assert lines(items) == [(str(log), 0, 2, "last words")]
        assert t.poll() == []
        if Path("/proc/self/fd").is_dir():  # the deleted file is let go, not pinned on disk
            assert not [h for h in open_files() if "train.log" in h]
        log.write_bytes(b"run 2\n")
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["recreated"]
        assert lines(items) == [(str(log), 1, 1, "run 2")]
        # delete + recreate between two polls (a relaunch)
        os.unlink(log)
        log.write_bytes(b"run 3\n")
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["recreated"]
        assert lines(items) == [(str(log), 2, 1, "run 3")]


def test_crlf_and_carriage_return_progress_pass_through(log: Path) -> None:
    log.write_bytes(b"dos line\r\n 10%|#  | 1/10\r 20%|## | 2/10\r100%|###| 10/10\n")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["dos line\r", " 10%|#  | 1/10\r 20%|## | 2/10\r100%|###| 10/10"]


def test_invalid_utf8_becomes_replacement_characters(log: Path) -> None:
    log.write_bytes(b"ok\n\xff\xfe bad \xc3\n\x00nul\n")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["ok", "\ufffd\ufffd bad \ufffd", "\x00nul"]


def test_overlong_line_is_cut_and_memory_bounded(log: Path) -> None:
    mib = 1 << 20
    log.write_bytes(b"before\n")
    with LogTailer([str(log)], use_watchdog=False) as t:
        assert texts(t.poll()) == ["before"]
        f = next(iter(t._followers.values()))
        for _ in range(12):  # 3 MiB without a newline, in 256 KiB writes
            append(log, b"x" * (mib // 4))
            assert t.poll() == []
            assert f.splitter.buffered <= 2 * mib
        append(log, b"\nafter\n")
        items = t.poll()
        got = lines(items)
        assert [(ln, len(text)) for _, _, ln, text in got][1:] == [(3, 5)]
        lineno, cut = got[0][2], got[0][3]
        assert lineno == 2
        assert cut == "x" * mib + " …[cut 2 MiB]"
        [notice] = notices(items, "cut_line")
        assert notice.message.endswith("line 2 cut at 1 MiB (3 MiB long)")
        assert t.cut_lines() == 1


def test_overlong_lines_inside_one_read_are_cut(log: Path) -> None:
    body = b"short\n" + b"y" * 50 + b"\n" + "é".encode() * 20 + b"\nend\n"
    log.write_bytes(body)
    with LogTailer([str(log)], use_watchdog=False, max_line_bytes=16, chunk_bytes=4096) as t:
        got = texts(t.poll())
        # 'é' is 2 bytes: the cut never splits it
        assert got == ["short", "y" * 16 + " …[cut 34 B]", "é" * 8 + " …[cut 24 B]", "end"]
        assert t.cut_lines() == 2


def test_globs_pick_up_new_ranks_with_own_numbering(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    pattern = str(logs / "rank*.log")
    with LogTailer([pattern], use_watchdog=False) as t:
        assert [n.kind for n in notices(t.poll())] == ["waiting"]
        logs.mkdir()
        (logs / "rank0.log").write_bytes(b"r0 a\nr0 b\n")
        items = t.poll()
        assert [n.kind for n in notices(items)] == ["appeared"]
        assert [(ln, s) for _, _, ln, s in lines(items)] == [(1, "r0 a"), (2, "r0 b")]
        (logs / "rank1.log").write_bytes(b"r1 a\n")
        (logs / "other.txt").write_bytes(b"nope\n")
        append(logs / "rank0.log", b"r0 c\n")
        got = sorted(lines(t.poll()))
        assert got == [
            (str(logs / "rank0.log"), 0, 3, "r0 c"),
            (str(logs / "rank1.log"), 0, 1, "r1 a"),
        ]
        assert sorted(t.files) == [str(logs / "rank0.log"), str(logs / "rank1.log")]


def test_directory_in_place_of_file_is_reported_once(tmp_path: Path) -> None:
    (tmp_path / "bad.log").mkdir()
    good = tmp_path / "good.log"
    good.write_bytes(b"fine\n")
    with LogTailer([str(tmp_path / "bad.log"), str(good)], use_watchdog=False) as t:
        items = t.poll()
        [err] = notices(items, "error")
        assert err.path == str(tmp_path / "bad.log") and "directory" in err.message
        assert "\n" not in err.message
        assert texts(items) == ["fine"]
        append(good, b"more\n")
        assert t.poll() == [Chunk(str(good), "more\n", 2, 0)]


def test_permission_denied_is_reported_and_recovers(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log.write_bytes(b"secret\n")
    log.chmod(0)
    if os.geteuid() == 0:  # root reads any mode: make open() answer as it would for a user
        real_open = os.open

        def denying_open(path, flags, *args):  # type: ignore[no-untyped-def]
            if os.fspath(path) == str(log) and not log.stat().st_mode & 0o444:
                raise PermissionError(13, "Permission denied", str(log))
            return real_open(path, flags, *args)

        monkeypatch.setattr(os, "open", denying_open)
    with LogTailer([str(log)], use_watchdog=False) as t:
        [err] = notices(t.poll(), "error")
        assert err.message == f"{log}: cannot open: Permission denied"
        assert t.poll() == []  # reported once
        log.chmod(0o644)
        assert texts(t.poll()) == ["secret"]


def test_live_attach_starts_at_end_with_true_line_numbers(tmp_path: Path) -> None:
    old = tmp_path / "old.log"
    old.write_bytes(b"h1\nh2\nh3\npartial")
    late = tmp_path / "late.log"
    with LogTailer([str(old), str(late)], from_start=False, use_watchdog=False) as t:
        items = t.poll()
        assert texts(items) == []
        append(old, b" done\nnext\n")
        late.write_bytes(b"all of it\n")
        got = lines(t.poll())
        assert (str(old), 0, 4, "partial done") in got and (str(old), 0, 5, "next") in got
        assert (str(late), 0, 1, "all of it") in got  # appeared after attach: read whole


def test_large_backlog_is_read_over_several_polls(log: Path) -> None:
    data = b"".join(b"line %d\n" % i for i in range(20000))
    log.write_bytes(data)
    with LogTailer([str(log)], use_watchdog=False, chunk_bytes=1024) as t:
        first = t.poll()
        assert 0 < len(texts(first)) < 20000
        assert t.wait(10.0) is True  # backlog: returns at once
        got = lines(first)
        while len(got) < 20000:
            got += lines(t.poll())
        assert [ln for _, _, ln, _ in got] == list(range(1, 20001))
        assert got[-1][3] == "line 19999"


def test_polling_only_wait_times_out_quietly(log: Path) -> None:
    log.write_bytes(b"a\n")
    with LogTailer([str(log)], use_watchdog=False, poll_interval=0.05) as t:
        assert notices(t.poll()) == []
        start = time.monotonic()
        assert t.wait(5.0) is False
        assert time.monotonic() - start < 1.0  # capped at poll_interval


def woken_within(tailer: LogTailer, action) -> float:  # noqa: ANN001
    """Seconds until ``tailer.wait`` returns True after ``action`` runs in
    another thread 0.2 s from now (fails if it never wakes in 10 s)."""
    timer = threading.Timer(0.2, action)
    timer.start()
    start = time.monotonic()
    woke = tailer.wait(10.0)
    timer.join()
    assert woke is True
    return time.monotonic() - start


def test_watchdog_wakes_wait_on_append(log: Path) -> None:
    log.write_bytes(b"a\n")
    with LogTailer([str(log)], poll_interval=30.0) as t:
        assert notices(t.poll()) == []
        assert t.wait(0.2) is False  # nothing happened
        assert woken_within(t, lambda: append(log, b"b\n")) < 5.0
        assert texts(t.poll()) == ["b"]
    # close() stops the observer thread and lets the file go
    assert not [th for th in threading.enumerate() if type(th).__module__.startswith("watchdog")]
    if Path("/proc/self/fd").is_dir():
        assert not [h for h in open_files() if h == str(log)]


def test_without_write_events_appends_wait_for_the_poll_but_rotation_wakes(log: Path, tmp_path: Path) -> None:
    """``wake_on_writes=False`` (the live dashboard): the kernel sends no
    event per flush, so an append waits for the poll; a rotation (the name
    moved away and created anew) still wakes the tailer at once."""
    log.write_bytes(b"a\n")
    with LogTailer([str(log)], poll_interval=30.0, wake_on_writes=False) as t:
        assert texts(t.poll()) == ["a"]
        append(log, b"b\n")
        assert t.wait(1.0) is False  # no event for a write
        assert texts(t.poll()) == ["b"]  # the poll (a stat by name) finds it
        assert woken_within(t, lambda: (log.rename(tmp_path / "train.log.1"), log.write_bytes(b"c\n"))) < 5.0
        assert texts(t.poll()) == ["c"]


def test_watchdog_wakes_on_glob_file_created_in_new_directory(tmp_path: Path) -> None:
    with LogTailer([str(tmp_path / "logs" / "rank*.log")], poll_interval=30.0) as t:
        t.poll()
        (tmp_path / "logs").mkdir()
        assert t.wait(10.0) is True  # the directory's creation
        t.poll()  # now watches logs/
        timer = threading.Timer(0.2, (tmp_path / "logs" / "rank3.log").write_bytes, (b"hi\n",))
        timer.start()
        assert t.wait(10.0) is True
        timer.join()
        assert texts(t.poll()) == ["hi"]


def test_watchdog_failure_falls_back_to_polling_with_one_notice(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import watchdog.observers

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "inotify watch limit reached")

    monkeypatch.setattr(watchdog.observers, "Observer", broken)
    log.write_bytes(b"a\n")
    with LogTailer([str(log)], poll_interval=0.05) as t:
        items = t.poll()
        [err] = notices(items)
        assert err.kind == "error" and "inotify watch limit" in err.message
        assert texts(items) == ["a"]
        append(log, b"b\n")
        t.wait(1.0)
        assert t.poll() == [Chunk(str(log), "b\n", 2, 0)]


def test_read_chunks_keeps_last_line_without_newline(tmp_path: Path) -> None:
    p = tmp_path / "done.log"
    p.write_bytes(b"a\r\nb\n" + b"z" * 40 + b"\nlast")
    items = list(read_chunks(str(p), chunk_bytes=7, max_line_bytes=32))
    assert texts(items) == ["a\r", "b", "z" * 32 + " …[cut 8 B]", "last"]
    assert [ln for _, _, ln, _ in lines(items)] == [1, 2, 3, 4]
    assert len(notices(items, "cut_line")) == 1
    with pytest.raises(OSError):
        list(read_chunks(str(tmp_path / "missing.log")))


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(
        st.sampled_from([b"a", b"\n", b"\r", b"\r\n", "é".encode(), "❄".encode(), b"\xff", b"\x80", b"xyz"]),
        max_size=80,
    ),
    chunk=st.integers(1, 9),
)
def test_read_chunks_equals_whole_decode_for_any_chunking(tmp_path_factory, data, chunk) -> None:
    raw = b"".join(data)
    p = tmp_path_factory.mktemp("h") / "x.log"
    p.write_bytes(raw)
    text = "".join(c.text for c in read_chunks(str(p), chunk_bytes=chunk) if isinstance(c, Chunk))
    expected = raw.decode("utf-8", "replace")
    if raw and not raw.endswith(b"\n"):
        expected += "\n"
    assert text == expected


@pytest.mark.skipif(not REALWORLD.is_dir(), reason="shared/realworld corpus not present")
def test_realworld_logs_line_count_and_content_match(tmp_path: Path) -> None:
    for src in sorted(REALWORLD.glob("*.log")):
        raw = src.read_bytes()
        got = lines(list(read_chunks(str(src), chunk_bytes=4096)))
        assert len(got) == raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1), src.name
        assert "\n".join(s for *_, s in got) + "\n" == raw.decode("utf-8", "replace") + (
            "" if raw.endswith(b"\n") else "\n"
        )
        # Tailing the same bytes written in odd-sized pieces gives the same lines.
        live = tmp_path / src.name
        live.write_bytes(b"")
        with LogTailer([str(live)], use_watchdog=False, chunk_bytes=4096) as t:
            tailed = []
            for i in range(0, len(raw), 7777):
                append(live, raw[i : i + 7777])
                tailed += lines(t.poll())
        complete = raw.count(b"\n")
        assert [s for *_, s in tailed] == [s for *_, s in got][:complete], src.name


def test_unfinished_tqdm_line_reports_its_latest_redraw(tmp_path: Path) -> None:
    """An HF-style tqdm bar has no newline until the epoch ends: a live watch
    must still see its progress, once per change, from its newest redraw."""
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n")
    with LogTailer([str(log)], use_watchdog=False) as tailer:
        assert [c.text for c in tailer.poll() if isinstance(c, Chunk)] == ["start\n"]
        with open(log, "ab") as fh:
            fh.write(b"\r 10%|#         | 10/100 [00:05<00:45, 2.0it/s]")
            fh.flush()
            got = [c for c in tailer.poll() if isinstance(c, Chunk)]
            assert [(c.partial, c.first_lineno, c.text) for c in got] == [
                (True, 2, " 10%|#         | 10/100 [00:05<00:45, 2.0it/s]\n")
            ]
            assert [c for c in tailer.poll() if isinstance(c, Chunk)] == []  # nothing new: nothing said
            fh.write(b"\r 20%|##        | 20/100 [00:10<00:40, 2.0it/s]")
            fh.flush()
            (c,) = [c for c in tailer.poll() if isinstance(c, Chunk)]
            assert c.partial and c.text.startswith(" 20%")
            fh.write(b"\r100%|##########| 100/100 [00:50<00:00, 2.0it/s]\nnext\n")
            fh.flush()
            got = [c for c in tailer.poll() if isinstance(c, Chunk)]
            assert [c.partial for c in got] == [False]
            assert got[0].first_lineno == 2 and got[0].text.endswith("100/100 [00:50<00:00, 2.0it/s]\nnext\n")


def test_a_cut_tqdm_line_still_reports_its_newest_state(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    with LogTailer([str(log)], use_watchdog=False, max_line_bytes=1024) as tailer:
        with open(log, "ab") as fh:
            for i in range(200):  # ~10 KiB of redraws: past the 1 KiB line limit
                fh.write(f"\r{i:3d}%|          | {i}/200 [00:01<00:01, 9.9it/s]".encode())
            fh.flush()
        chunks = [c for c in tailer.poll() if isinstance(c, Chunk)]
        assert chunks and chunks[-1].partial and "199/200" in chunks[-1].text


def test_a_log_named_with_brackets_is_that_file_not_a_glob(tmp_path: Path) -> None:
    """``train[0].log`` (a sweep's run, a rank's file) exists: it is followed
    as named. Read as a glob, ``[0]`` is a set of characters: it matched
    only ``train0.log`` and the watcher waited forever. A name with
    wildcards that is no file stays a glob."""
    from dflash_watch.commands.common import expand_logs

    named = tmp_path / "train[0].log"
    named.write_text("step 1/100 | loss 2.0\n")
    other = tmp_path / "train0.log"
    other.write_text("another run\n")
    with LogTailer([str(named)], use_watchdog=False) as t:
        chunks = [c for c in t.poll() if isinstance(c, Chunk)]
    assert [(c.path, c.text) for c in chunks] == [(str(named), "step 1/100 | loss 2.0\n")]
    assert expand_logs([str(named)]) == [str(named)]
    assert expand_logs([str(tmp_path / "train[0-9].log")]) == [str(other)]
    with LogTailer([str(tmp_path / "train[0-9].log")], use_watchdog=False) as t:
        assert [c.path for c in t.poll() if isinstance(c, Chunk)] == [str(other)]
