"""The collector's policy: replay collects the young in large batches and puts everything back.

Speed itself is measured by ``benchmarks/bench_replay.py``; these tests check
that replay really runs under ``bulk_read`` and that a library caller's
collector is left exactly as it was (thresholds, frozen objects), also when
the replay fails half-way.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from dflash_watch import gc_policy
from dflash_watch.monitor import Monitor
from dflash_watch.replay import replay

LOG = "\n".join(
    f"2026-11-29 10:{i // 60:02d}:{i % 60:02d} step {i}/400 | loss 2.{i % 10} | 21500 tok/s" for i in range(400)
) + "\n"


@pytest.fixture
def collector():
    """The test's collector settings, restored whatever the test does."""
    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class Watching(Monitor):
    """A Monitor that notes the collector's settings whenever it is fed."""

    def __init__(self) -> None:
        super().__init__(keep_lines=0)
        self.seen: list[tuple[tuple[int, int, int], int]] = []

    def feed_events(self, events):  # type: ignore[no-untyped-def]
        self.seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return super().feed_events(events)


def test_replay_feeds_with_young_collections_batched_and_restores_the_collector(tmp_path: Path, collector) -> None:
    log = tmp_path / "train.log"
    log.write_text(LOG)
    monitor = Watching()
    replay([str(log)], monitor=monitor)
    assert monitor.seen, "the monitor was never fed"
    assert all(t[0] >= gc_policy.BULK_YOUNG_THRESHOLD and t[1:] == (10, 10) for t, _ in monitor.seen)
    assert all(frozen > 0 for _, frozen in monitor.seen)
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_failed_replay_still_restores_the_collector(tmp_path: Path, collector) -> None:
    log = tmp_path / "train.log"
    log.write_text(LOG)

    class Failing(Monitor):
        def feed_events(self, events):  # type: ignore[no-untyped-def]
            raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        replay([str(log)], monitor=Failing(keep_lines=0))
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_what_a_caller_froze_stays_frozen_and_a_higher_threshold_stays(collector) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    gc.set_threshold(90_000, 10, 10)
    with gc_policy.bulk_read():
        assert gc.get_threshold() == (90_000, 10, 10)
    # Frozen objects freed by their counts leave the count; a thaw empties it.
    assert gc.get_freeze_count() > frozen // 2
    assert gc.get_threshold() == (90_000, 10, 10)


def test_cyclic_garbage_made_during_a_bulk_read_is_still_collected(collector) -> None:
    import weakref

    class Node:
        pass

    with gc_policy.bulk_read():
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        ref = weakref.ref(a)
        del a, b
        # Young collections count live allocations (freed ones are taken off):
        # keep more than the threshold alive.
        kept = [[] for _ in range(gc_policy.BULK_YOUNG_THRESHOLD * 2)]
        assert ref() is None
        del kept


def test_a_dashboard_settled_during_a_catch_up_keeps_its_policy_after_it(collector) -> None:
    """Live, the tailer's catch-up reads in bulk while the dashboard settles on its own thread."""
    with gc_policy.bulk_read():
        with gc_policy.bulk_read():  # a second file's catch-up
            gc_policy.settle()
        assert gc.get_threshold()[0] >= gc_policy.BULK_YOUNG_THRESHOLD
    assert gc.get_threshold() == (gc_policy.LIVE_YOUNG_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() > 0


def test_nested_bulk_reads_restore_once_at_the_outermost_end(collector) -> None:
    with gc_policy.bulk_read():
        with gc_policy.bulk_read():
            pass
        assert gc.get_threshold()[0] == gc_policy.BULK_YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_live_catch_up_chunks_read_in_bulk_and_fresh_lines_do_not(collector) -> None:
    """A catch-up chunk (the file's backlog at attach) is read as replay reads; followed lines as usual."""
    monitor = Watching()
    backlog = LOG.splitlines(keepends=True)
    monitor.feed_text("/logs/train.log", "".join(backlog[:300]), 1, now=1e9)
    caught_up = list(monitor.seen)
    monitor.seen.clear()
    monitor.feed_text("/logs/train.log", "".join(backlog[300:]), 301, now=1e9 + 1, fresh=True)
    assert caught_up and all(t[0] >= gc_policy.BULK_YOUNG_THRESHOLD for t, _ in caught_up)
    assert monitor.seen and all(t == (700, 10, 10) for t, _ in monitor.seen)
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_live_catch_up_is_one_bulk_read_and_following_is_not(tmp_path: Path, collector) -> None:
    """Attached to a log of several chunks, the tailer's thread reads its
    whole backlog with the collector raised: not given back between two
    chunks (where the tailer reads and splits the next one, young
    collections would run at the default threshold), and given back once
    the backlog is read: lines followed after are read as usual."""
    from dflash_watch.live import LiveSession

    seen: list[tuple[tuple[int, int, int], bool]] = []  # (thresholds as a chunk comes, fresh) of each chunk

    class Entering(Monitor):
        def feed_text(self, path, text, first_lineno, now, generation=0, fresh=False, **kw):  # type: ignore[no-untyped-def]
            seen.append((gc.get_threshold(), fresh))
            return super().feed_text(path, text, first_lineno, now, generation, fresh, **kw)

    log = tmp_path / "train.log"
    lines = [f"2026-11-29 10:{i // 3600 % 60:02d}:{i // 60 % 60:02d} step {i}/90000 | loss 2.{i % 10} | 21500 tok/s | "
             "data shard /data/shards/part-0001.arrow\n" for i in range(30000)]
    log.write_text("".join(lines))  # ~3 MiB: chunks of 1 MiB
    monitor = Entering(keep_lines=0, keep_history=False)
    session = LiveSession(monitor, logs=(str(log),), use_nvml=False, clock=None, speed=0.0, tail_poll_s=0.05)

    def read(count: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = monitor._streams.get(str(log))
            if state is not None and state.lines >= count:
                return
            time.sleep(0.01)
        raise AssertionError(f"{count} lines not read")

    with session:
        read(len(lines))
        time.sleep(0.3)  # an empty round: the backlog is read
        with log.open("a") as fh:
            fh.write(lines[0])
        read(len(lines) + 1)
    backlog = [t for t, fresh in seen if not fresh]
    after = [t for t, fresh in seen if fresh]
    assert len(backlog) >= 3, seen
    assert all(t[0] >= gc_policy.BULK_YOUNG_THRESHOLD for t in backlog), seen
    assert after and all(t == (700, 10, 10) for t in after), seen
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
