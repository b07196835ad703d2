"""The order and times in which a stream's events leave it (``parsers.clock``).

Events keep the file's order (a rank's steps never go backwards) at times
that never step back (the replay merges files by time), on the clocks real
logs have: ranks a few milliseconds apart, a clock stepped back by NTP or
forward by hours, lines before the first timestamp, and logs with no
timestamp at all but tqdm's elapsed counter.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.clock import JITTER_S, PENDING_MAX
from dflash_watch.parsers.events import Crash, Progress, Tick
from dflash_watch.parsers.stream import LogStream

UTC = UTC
T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp()


def iso(t: float) -> str:
    d = datetime.fromtimestamp(t, UTC)
    return d.strftime("%Y-%m-%d %H:%M:%S") + f",{d.microsecond // 1000:03d}"


def feed_all(stream: LogStream, text: str, fallback: float = 0.0, pieces: int = 1) -> list:
    lines = [line + "\n" for line in text.split("\n")[:-1]]  # '\r' is no line end
    step = max(1, len(lines) // pieces + 1)
    events = []
    for i in range(0, len(lines), step):
        events += stream.feed("".join(lines[i:i + step]), i + 1, fallback)
    return events + stream.flush(fallback)


def progress(events: list) -> list[Progress]:
    return [e for e in events if isinstance(e, Progress)]


def non_decreasing(events: list) -> bool:
    return all(a.time <= b.time for a, b in zip(events, events[1:]))


def ranked_log(steps: int, ranks: int, jitter_ms: int, seed: int = 1) -> str:
    """Every rank prints every step, in rank order, stamped with a jitter."""
    rnd = random.Random(seed)
    out = []
    for step in range(steps):
        for rank in range(ranks):
            t = T0 + step * 0.5 + rnd.randint(-jitter_ms, jitter_ms) / 1000
            out.append(f"[rank{rank}]:{iso(t)} - INFO - step {step}/1000 | loss 2.5 | 21.5 Ktok/s")
    return "\n".join(out) + "\n"


def test_jittered_ranks_keep_their_steps_in_order() -> None:
    # rank 1's step 101 stamped 2 ms before rank 0's step 100, printed after it.
    text = (
        f"[rank0]:{iso(T0 + 0.002)} - INFO - step 100/1000 | loss 2.5\n"
        f"[rank1]:{iso(T0 + 0.000)} - INFO - step 101/1000 | loss 2.5\n"
    )
    events = progress(LogStream("t.log", tz=UTC).feed(text, 1, 0.0))
    assert [(p.rank, p.step) for p in events] == [(0, 100), (1, 101)]
    assert [p.time for p in events] == [T0 + 0.002, T0 + 0.002]
    assert all(p.clocked for p in events)  # a hold of 2 ms is jitter, not a lost clock


def test_many_jittered_ranks_over_chunks() -> None:
    text = ranked_log(steps=200, ranks=8, jitter_ms=20)
    events = progress(feed_all(LogStream("t.log", tz=UTC), text, pieces=7))
    assert len(events) == 1600
    assert non_decreasing(events)
    for rank in range(8):
        steps = [p.step for p in events if p.rank == rank]
        assert steps == sorted(steps) == list(range(200))
    assert all(p.clocked for p in events)
    # No time is held back by more than the jitter there is.
    lines = text.splitlines()
    for p in events:
        own = LogStream("x", tz=UTC)._times.parse(lines[int(p.source.rsplit(":", 1)[1]) - 1])
        assert 0 <= p.time - own <= 0.040


def test_a_crash_known_late_is_placed_by_its_time_among_the_lines_of_its_traceback() -> None:
    """Rank 0's traceback is known to be over only at the line after it
    (10:00:13): its crash (10:00:12, the clock at its exception line) goes
    back among the lines written while it was open, to where its time puts
    it, not after them; rank 1's steps keep their order."""
    text = (
        f"{iso(T0 + 10)} - INFO - starting\n"
        "[rank0]: Traceback (most recent call last):\n"
        f"[rank1]:{iso(T0 + 12)} - INFO - step 1 | loss 1\n"
        '[rank0]:   File "x.py", line 1, in <module>\n'
        "[rank0]: ValueError: x\n"
        f"[rank1]:{iso(T0 + 13)} - INFO - step 2 | loss 1\n"
        f"[rank1]:{iso(T0 + 14)} - INFO - step 3 | loss 1\n"
    )
    for pieces in (1, 7):
        events = feed_all(LogStream("t.log", tz=UTC), text, pieces=pieces)
        assert [(type(e).__name__, e.time - T0) for e in events] == [
            ("Progress", 12), ("Crash", 12), ("Progress", 13), ("Progress", 14)
        ], pieces


def test_a_rank_copy_of_a_crash_is_not_put_after_the_launchers_later_lines() -> None:
    """As in the disk-full log of the corpus: three ranks' tracebacks, then
    the launcher's SIGTERM lines 15 s later, and only then does the last
    rank's traceback read as over. Its crash keeps its place by time, before
    the launcher's lines, so the crash detector merges it with its peers."""
    lines = [f"{iso(T0)} - INFO - loading"]
    for r in (5, 2, 4):
        lines += [
            f"[rank{r}]: Traceback (most recent call last):",
            f'[rank{r}]:   File "/x/load.py", line 845, in download_and_prepare',
            f"[rank{r}]:     raise OSError(",
            f"[rank{r}]: OSError: Not enough disk space. Needed: 45.32 MiB",
        ]
    lines += [
        f"W1129 10:00:15.{i:06d} 77 torch/distributed/elastic/multiprocessing/api.py:900] Sending process {i} closing signal SIGTERM"
        for i in range(3)
    ]
    text = "\n".join(lines) + "\n"
    events = feed_all(LogStream("t.log", tz=UTC, default_year=2026), text, pieces=3)
    assert non_decreasing(events)
    disk = [e for e in events if isinstance(e, Crash) and e.exc_type == "OSError"]
    assert [c.rank for c in disk] == [5, 2, 4]
    assert all(c.time == T0 for c in disk)
    assert events.index(disk[-1]) == 2


def test_a_clock_stepped_back_by_ntp_holds_and_says_unclocked() -> None:
    """Stamps run to 10:05, step back to 10:02 (NTP), run on: the events of
    the three minutes that read earlier than 10:05 carry 10:05 and are not
    clocked (durations must not be measured on them), then the stamps lead
    again."""
    stamps = [T0 + i for i in range(300)] + [T0 + 120 + i for i in range(400)]
    text = "".join(f"{iso(t)} - INFO - step {i} | loss 2.0 | 20.0 Ktok/s\n" for i, t in enumerate(stamps))
    events = progress(feed_all(LogStream("t.log", tz=UTC), text, pieces=3))
    assert [p.step for p in events] == list(range(700))
    assert non_decreasing(events)
    held = events[300:480]  # stamped 10:02:00 to 10:04:59
    assert all(p.time == T0 + 299 for p in held)
    # Held back by more than JITTER_S: not clocked; the last three by 2 s at most.
    assert [p.clocked for p in held] == [False] * 177 + [True] * 3
    assert int(JITTER_S) == 2
    assert all(p.clocked and p.time == T0 + p.step - 180 for p in events[480:])


def detector_alerts(events: list, **config: float) -> list:
    """What the detectors say on ``events``, with deadlines delivered as the
    replay's Monitor delivers them (a Tick at each deadline passed)."""
    detectors = DetectorSet(build_detectors(DetectorConfig(**config)))
    alerts = []
    for event in events:
        while (due := detectors.deadline()) is not None and due < event.time:
            alerts += detectors.update(Tick(due))
        alerts += detectors.update(event)
    return alerts


def test_detectors_survive_a_clock_stepped_back() -> None:
    stamps = [T0 + i for i in range(600)] + [T0 + 300 + i for i in range(900)]
    text = "".join(f"{iso(t)} - INFO - step {i} | loss 2.0 | 20.0 Ktok/s\n" for i, t in enumerate(stamps))
    events = feed_all(LogStream("t.log", tz=UTC), text, pieces=4)
    assert non_decreasing(events)  # what the detectors see: time stands still for 5 min
    assert sum(1 for e in events if not e.clocked) == 300 - int(JITTER_S) - 1
    fired = [a for a in detector_alerts(events) if a.state == "firing"]
    assert [a.detector for a in fired] == []


def test_a_clock_jumped_forward_passes_as_it_is() -> None:
    """A forward jump cannot be told from silence in one log: the times pass
    unchanged (the stall detector sees a gap; throughput restarts)."""
    stamps = [T0 + i for i in range(100)] + [T0 + 3 * 3600 + i for i in range(100)]
    text = "".join(f"{iso(t)} - INFO - step {i} | loss 2.0\n" for i, t in enumerate(stamps))
    events = progress(feed_all(LogStream("t.log", tz=UTC), text))
    assert [p.time for p in events] == stamps
    assert all(p.clocked for p in events)


# -- lines before the first timestamp ----------------------------------------------


HEAD = "step 1 | loss 3.0\nstep 2 | loss 2.9\n"


def test_live_lines_before_the_first_timestamp_keep_the_arrival_time_and_hold_nothing() -> None:
    stream = LogStream("t.log", tz=UTC)
    events = progress(stream.feed(HEAD + f"{iso(T0)} - INFO - step 3 | loss 2.8\n", 1, T0 + 3600))
    assert [(p.step, p.time, p.clocked) for p in events] == [
        (1, T0 + 3600, False), (2, T0 + 3600, False), (3, T0, True)
    ]


def test_replay_lines_before_the_first_timestamp_take_it() -> None:
    """Replay's fallback is the file's mtime, after every stamp in it: the
    lines before the first stamp wait for it, so the file stays in order."""
    mtime = T0 + 86400
    for pieces in (1, 3):
        stream = LogStream("t.log", tz=UTC, replay=True)
        text = HEAD + "noise\n" + f"{iso(T0)} - INFO - step 3 | loss 2.8\n" + "step 4 | loss 2.7\n"
        events = progress(feed_all(stream, text, mtime, pieces))
        assert [(p.step, p.time, p.clocked) for p in events] == [
            (1, T0, False), (2, T0, False), (3, T0, True), (4, T0, False)
        ], pieces


def test_replay_without_any_clock_releases_at_the_end_or_when_too_many_wait() -> None:
    stream = LogStream("t.log", tz=UTC, replay=True)
    assert stream.feed(HEAD, 1, 99.0) == []
    assert [(p.step, p.time) for p in progress(stream.flush(99.0))] == [(1, 99.0), (2, 99.0)]
    stream = LogStream("t.log", tz=UTC, replay=True)
    text = "".join(f"step {i} | loss 2\n" for i in range(PENDING_MAX + 10))
    events = progress(stream.feed(text, 1, 99.0))
    assert [p.step for p in events] == list(range(PENDING_MAX + 10))


def test_a_traceback_begun_before_the_first_timestamp_does_not_stop_the_clock() -> None:
    mtime = T0 + 86400
    text = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ValueError: early\n"
        f"{iso(T0)} - INFO - step 3 | loss 2.8\n"
        f"{iso(T0 + 1)} - INFO - step 4 | loss 2.8\n"
    )
    for replay in (False, True):
        events = feed_all(LogStream("t.log", tz=UTC, replay=replay), text, mtime, pieces=5)
        steps = progress(events)
        assert [p.time for p in steps] == [T0, T0 + 1]
        crash = [e for e in events if isinstance(e, Crash)]
        assert len(crash) == 1


# -- tqdm's elapsed counter as the clock of a log without timestamps --------------------


class ElapsedPattern:
    """A stand-in progress format that reads tqdm's ``[MM:SS<`` counter into
    ``elapsed_s`` (until parsers.progress fills it for tqdm lines)."""

    literals = ("it/s]",)

    def values(self, text: str, rank: int | None = None) -> tuple | None:
        import re

        m = re.search(r"\| *(\d+)/(\d+) \[(\d+):(\d+)<", text)
        if m is None:
            return None
        elapsed = int(m.group(3)) * 60 + int(m.group(4))
        return int(m.group(1)), int(m.group(2)), None, None, rank, (), None, None, None, float(elapsed)


def bar(step: int, total: int, elapsed: int) -> str:
    return f" {step * 100 // total}%|#| {step}/{total} [{elapsed // 60:02d}:{elapsed % 60:02d}<00:10, 1.00it/s]"


def test_a_bare_tqdm_log_runs_on_the_elapsed_counter_in_replay() -> None:
    start = 5000.0
    lines = [bar(s, 100, s * 2) for s in range(1, 51)]  # first bar: 2 s a step
    lines.append("Evaluating...")
    lines += [bar(s, 100, s * 3) for s in range(1, 11)]  # a new bar: its counter restarts
    text = "\n".join(lines) + "\n"
    for pieces in (1, 4):
        stream = LogStream("t.log", progress_pattern=ElapsedPattern(), replay=True)  # type: ignore[arg-type]
        events = progress(feed_all(stream, text, start, pieces))
        assert [p.time - start for p in events] == [s * 2.0 for s in range(1, 51)] + [100.0 + s * 3 for s in range(1, 11)]
        assert all(p.clocked for p in events)
    # Live, the Monitor's wall clock is the clock: the stream leaves them be.
    live = progress(feed_all(LogStream("t.log", progress_pattern=ElapsedPattern()), text, start))  # type: ignore[arg-type]
    assert all(p.time == start and not p.clocked for p in live)


def test_the_stall_detector_works_on_a_bare_tqdm_log_in_replay() -> None:
    """A bare tqdm log whose bar stops for an hour: stall fires on the
    counter's clock (every event at the fallback time could not say so)."""
    lines = [bar(s, 1000, s) for s in range(1, 200)] + [bar(200, 1000, 3800)]
    text = "\n".join(lines) + "\n"
    stream = LogStream("t.log", progress_pattern=ElapsedPattern(), replay=True)  # type: ignore[arg-type]
    events = feed_all(stream, text, 5000.0)
    fired = [a.detector for a in detector_alerts(events) if a.state == "firing"]
    assert "stall" in fired


def test_tqdm_lines_the_built_in_parser_reads_give_the_counter() -> None:
    """The same with tqdm's own lines (the parser fills ``elapsed_s``),
    redrawn with '\\r' on one line as tqdm writes them to a file."""
    redraws = ["".join("\r" + bar(s, 100, s * 2) for s in range(k, k + 5)) for k in range(1, 96, 5)]
    text = "\n".join(redraws) + "\n"
    stream = LogStream("t.log", replay=True)
    events = progress(feed_all(stream, text, 5000.0, pieces=3))
    # Every state a line showed is progress, each at its own counter.
    assert [p.elapsed_s for p in events] == [float(s * 2) for s in range(1, 96)]
    assert [p.time for p in events] == [5000.0 + s * 2 for s in range(1, 96)]
    assert all(p.clocked for p in events)


def test_stamps_after_a_stretch_on_the_counter_are_the_clock_again() -> None:
    """The counter stood in from the fallback time (replay: the file's
    mtime, after every stamp): the first stamp after it is believed, the
    one place where time steps back; from there on it never does."""
    mtime = T0 + 86400
    text = "\n".join(bar(s, 100, s) for s in range(1, 6)) + "\n"
    text += "".join(f"{iso(T0 + i)} - INFO - step {i} | loss 2.0\n" for i in range(3))
    stream = LogStream("t.log", tz=UTC, replay=True)
    events = progress(feed_all(stream, text, mtime, pieces=2))
    assert [p.time for p in events] == [mtime + s for s in range(1, 6)] + [T0, T0 + 1, T0 + 2]
    assert all(p.clocked for p in events)
    assert non_decreasing(events[5:])


def test_live_step_lines_before_the_first_stamp_do_not_hold_the_stamped_ones() -> None:
    """Live, lines before any stamp carry the arrival time, after every
    stamp of a log caught up from its start: run on by their step times
    they would still be no clock, and must not hold the stamped lines back."""
    text = "".join(f"step {i} | loss 2.0 | dt: 500ms\n" for i in range(1, 6))
    text += "".join(f"{iso(T0 + i)} - INFO - step {i} | loss 2.0 | dt: 500ms\n" for i in range(6, 9))
    events = progress(feed_all(LogStream("t.log", tz=UTC), text, T0 + 86400, pieces=2))
    assert [(p.time, p.clocked) for p in events[5:]] == [(T0 + i, True) for i in range(6, 9)]


def test_replay_step_lines_that_waited_for_the_first_stamp_stay_at_it() -> None:
    """They happened before it: run on past it by their step times, they
    would hold back every stamped line after it (a nanochat log prints
    hundreds of step lines before its first stamp)."""
    text = "".join(f"step {i} | loss 2.0 | dt: 500ms\n" for i in range(1, 101))
    text += "".join(f"{iso(T0 + i)} - INFO - step {100 + i} | loss 2.0 | dt: 500ms\n" for i in range(1, 4))
    events = progress(feed_all(LogStream("t.log", tz=UTC, replay=True), text, T0 + 86400, pieces=3))
    assert [(p.time, p.clocked) for p in events[:100]] == [(T0 + 1, False)] * 100
    assert [(p.time, p.clocked) for p in events[100:]] == [(T0 + i, True) for i in range(1, 4)]
