"""Live wiring: background threads that feed one Monitor from real sources.

The dashboard, `headless` and the demo all watch a run the same way: log
files tailed like `tail -F`, GPU samples from NVML or from a sample file,
probe files written by ``dflash_watch.probe`` (followed like the sample
file), the tmux job polled for its exit, and a 1 Hz tick. Each source runs on its
own daemon thread and only ever calls the Monitor (which has a lock), so a
slow NFS read or a hung NVML call can never freeze the UI, and stopping
the watcher never touches the training job.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from . import ingest
from .alignment import SIDE_HOLD_MAX, SIDE_HOLD_S, shifted
from .gc_policy import bulk_read
from .monitor import Monitor
from .parsers.events import GpuLost, GpuSample

if TYPE_CHECKING:
    from .sources.logtail import LogTailer

Clock = Callable[[], float]
# Seconds between tail rounds while a log is growing (see ``_tail_logs``).
_FLOWING_POLL_S = 0.4


class FollowClock:
    """Live "now" on the data's clock: the latest data time, run on by the wall.

    Ticks must agree with the data's timestamps, or a silence-driven
    detector compares a log stamped in another zone (or the demo's
    compressed time) with the wall clock and sees stalls that are not
    there. So this clock is anchored on the time of the data that arrived
    last, and runs on from it at ``speed`` (1 for a real run) while no data
    arrives, which is exactly the silence a stall is made of. Anchoring on
    the *latest* data, not the largest time seen, lets it follow a relaunch
    whose clock starts behind where the silence had run on to.
    """

    def __init__(self, monitor: Monitor, speed: float = 1.0, wall: Clock = time.time) -> None:
        self.monitor = monitor
        self.speed = speed
        self._wall = wall
        self._anchor: tuple[float, float] | None = None
        self._seen: float | None = None
        # When the log data fed last was written (``observe``), until more is fed.
        self._written: float | None = None
        # Side data is being fed (``side_feed``).
        self._side = False

    def observe(self, written: float | None = None) -> None:
        """Re-anchor if log data arrived since the last look (called after
        each feed of the log, under the Monitor's lock). ``written``: when
        the data was written, on the wall clock, where it was written
        before it was read (a catch-up: the file's mtime). The clock then
        runs on from that moment, not from the read: a log silent for hours
        before the watcher began has been silent for hours on this clock
        too (its stall says so at once, as ``check`` does), where anchoring
        on the read started the silence at zero.

        Only here may the clock go back: to the log's own time, where a
        relaunch's data starts behind where the silence had run on to.

        ``written`` holds until the next feed: events that come later out
        of the same data (the traceback that ended a caught-up log, closed
        when the log is found quiet) were written then too. Re-anchored on
        the read instead, the clock went back by the whole silence, and a
        crash that arrived while it ran ahead was held until it came back
        (hours, for a log that ended hours ago)."""
        self._written = written
        t = self.monitor.last_event_time
        if t is None:
            return
        if t != self._seen:
            self._seen = t
            self._anchor = self._anchored(t)
        if written is not None and self.speed == 1.0 and self._anchor is not None and written < self._anchor[1]:
            self._anchor = (t, written)

    @contextmanager
    def side_feed(self) -> Iterator[None]:
        """Around a feed of side data (a GPU sample, a sample or probe
        file's lines), under the Monitor's lock: it is stamped on this
        clock (or is history on its own), so it never moves it, neither
        while it is fed (an alert it raises reads the clock, ``offset``)
        nor after: its time is marked seen, and does not look like new log
        data to the next reading, which would re-anchor on it and forget
        when the log was written. Before, a sample between a catch-up and
        its quiet made the crash that came out at the quiet take the clock
        back by the whole silence, and a sample that raised an alert ran it
        ahead by as much."""
        self._side = True
        try:
            yield
        finally:
            self._side = False
            self._seen = self.monitor.last_event_time

    def _anchored(self, t: float) -> tuple[float, float]:
        """The anchor for data at ``t`` seen now: read now, or written at
        the kept write time (the same data as the last feed)."""
        wall = self._wall()
        written = self._written
        if written is not None and self.speed == 1.0 and written < wall:
            return (t, written)
        return (t, wall)

    def _follow(self) -> None:
        """Follow an event that came between feeds (a crash closed at the
        quiet, out of data already fed): forward only. Only a feed of the
        log (``observe``) may take the clock back; a reading that did would
        hold every deadline set while it ran ahead."""
        t = self.monitor.last_event_time
        if t is None or t == self._seen or self._side:
            return
        self._seen = t
        anchor = self._anchored(t)
        if self._anchor is None or self._at(anchor) >= self._at(self._anchor):
            self._anchor = anchor

    def _at(self, anchor: tuple[float, float]) -> float:
        data, then = anchor
        return data + (self._wall() - then) * self.speed

    def offset(self) -> float:
        """Data time minus wall time now (0 before any data): how far the
        data's clock runs ahead of this machine's."""
        self._follow()
        if self._anchor is None:
            return 0.0
        data, then = self._anchor
        return data - then - (self._wall() - then) * (1.0 - self.speed)

    def __call__(self) -> float:
        # Data may have arrived since the feeder last called ``observe``
        # (another thread reads the clock in between): follow it first.
        self._follow()
        if self._anchor is None:
            return self._wall()
        return self._at(self._anchor)


class Rounds:
    """Lets one thread ask a polling loop for a fresh round and wait until it is done.

    The log tailer polls every ``tail_poll_s``; before the tick asks tmux
    whether the job ended, it asks for a round that starts now, so that
    the job's last lines (its traceback, its crash signature) are read
    before its exit is judged, as when file events woke the tailer at
    every write.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._asked = 0  # requests made
        self._done = 0  # requests covered by a finished round

    def begin(self) -> int:
        """The polling loop starts a round: it covers the requests made so far."""
        with self._cond:
            return self._asked

    def end(self, covered: int) -> None:
        """The round that ``begin`` returned ``covered`` for has read everything it could."""
        with self._cond:
            self._done = max(self._done, covered)
            self._cond.notify_all()

    def sleep(self, timeout: float) -> None:
        """Between rounds: up to ``timeout``, or until someone asks for a round."""
        with self._cond:
            if self._asked == self._done:
                self._cond.wait(timeout)

    def ask(self, timeout: float) -> bool:
        """A round that starts after this call, finished within ``timeout``; False if not."""
        with self._cond:
            self._asked += 1
            want = self._asked
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._done >= want, timeout)

    def wake(self) -> None:
        """Wake a sleeping loop at once (to see that it should stop)."""
        with self._cond:
            self._cond.notify_all()


class LiveSession:
    def __init__(
        self,
        monitor: Monitor,
        *,
        logs: tuple[str, ...] = (),
        samples_file: str | None = None,
        probes: Sequence[str] | None = None,
        use_nvml: bool = True,
        gpu_interval_s: float = 1.0,
        gpu_indices: tuple[int, ...] | None = None,
        record_file: str | None = None,
        job: Any = None,
        clock: Clock | None = None,
        speed: float = 1.0,
        tick_s: float = 1.0,
        from_start: bool = True,
        auto_relaunch: Any = None,
        on_stall: Any = None,
        alerts_file: str | None = None,
        tail_poll_s: float = 0.5,
        quiet_s: float = 0.2,
        probe_poll_s: float = 1.0,
    ) -> None:
        self.monitor = monitor
        self.logs = logs
        self.samples_file = samples_file
        # Probe files and globs (``--probe``); None: ``dflash-probe-*.jsonl``
        # beside each log and in the job's working directory. Globs stay
        # globs, so a rank's file that appears later is picked up.
        self.probes_given = bool(probes)  # None or empty: the default globs
        self.probes = list(probes) if probes else _default_probe_globs(logs, job)
        self.use_nvml = use_nvml and samples_file is None
        self.gpu_interval_s = gpu_interval_s
        self.gpu_indices = gpu_indices
        self.record_file = record_file
        self.job = job
        # The data's clock unless told otherwise (tests pass a fixed one).
        # ``speed``: data seconds per wall second (the demo's compressed run).
        self.follow: FollowClock | None = None
        if clock is None:
            clock = self.follow = FollowClock(monitor, speed=speed)
        self.clock: Clock = clock
        if self.follow is not None and speed == 1.0:
            follow = self.follow
            monitor.to_wall = lambda t: t - follow.offset()
        # Log text has been read (ticks before it would set the detectors'
        # clocks by a wall clock the log's own may be hours from).
        self._log_seen = not logs
        self.tick_s = tick_s
        self.from_start = from_start
        # Appends to log and sample files are found by a stat by name every
        # ``tail_poll_s``; file events wake the tailers only when a file
        # appears, moves or goes (rotation, a relaunch). A training run
        # flushes its log about ten times a second, and watchdog's threads
        # handling an event per flush cost 0.7% of a core in
        # benchmarks/bench_dashboard.py, more than a stat every half second.
        # Half a second is well inside the dashboard's 1 s redraw, and a
        # backlog is still read without waiting (``LogTailer.wait``).
        self.tail_poll_s = tail_poll_s
        # Probe files grow by a flush every few seconds (``Probe``'s
        # every_s): a look a second by name finds appends, new ranks' files
        # and rotations soon enough, with no file-event thread of its own,
        # and the thread leaves as soon as the session stops.
        self.probe_poll_s = probe_poll_s
        # A log that has not grown for this long (wall seconds) is quiet
        # (``Monitor.quiet``): its last traceback is a crash now.
        self.quiet_s = quiet_s
        # An AutoRelaunchPolicy (opt-in): the tick loop then relaunches
        # crashed runs itself, and stops on a crash loop.
        self.auto = None
        if auto_relaunch is not None and job is not None:
            from .control.autorelaunch import AutoRelauncher

            self.auto = AutoRelauncher(job, auto_relaunch)
        # A stall while the job lives: its Python stacks into the alert
        # (``stacks.py``), and ``[run] on_stall``'s abort or relaunch after a
        # grace period, under auto-relaunch's crash-loop guard (``OnStallConfig``).
        self.stacks: Any = None
        self.on_stall: Any = None
        if job is not None:
            from .stacks import StallStacks

            self.stacks = StallStacks(monitor, job, _state_dir(job))
            monitor.subscribe(self.stacks)
            if on_stall is not None and on_stall.action != "alert":
                from .control.on_stall import OnStall

                self.on_stall = OnStall(monitor, job, on_stall, self.auto.policy if self.auto is not None else None)
        self._history = None
        if alerts_file:
            from .sources.alert_history import AlertHistory

            self._history = AlertHistory(alerts_file, on_notice=monitor.note)
            monitor.subscribe(self._history.write)
        self.sampler: Any = None
        self.gpu_unavailable: str | None = None
        self._sampler_thread: Any = None
        self._recorder: Any = None
        # NVML's samples taken before the log's first text (``_deliver_samples``).
        self._nvml_held: list[GpuSample | GpuLost] = []
        self._nvml_since = 0.0
        self._tailers: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        # Wakes the tick loop early: a stop, or deadlines that moved.
        self._rearm = threading.Event()
        self._log_rounds = Rounds()

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> LiveSession:
        self.monitor.live_since = time.time()
        if self.logs:
            self._spawn("log-tail", self._tail_logs)
        else:
            self.monitor.note("no log files given: pass --log PATH or set logs in the config")
        if self.probes:
            self._spawn("probes", self._tail_probes)
        if self.samples_file:
            self._spawn("gpu-samples", self._tail_samples)
        elif self.use_nvml:
            self._start_nvml()
        self._spawn("tick", self._tick_loop)
        return self

    def drain(self, timeout: float = 1.0) -> bool:
        """Read what the logs hold right now (one fresh round), then tell the
        Monitor they are quiet: a traceback that ended a log, and crash
        copies held back to merge ranks, become alerts. For a watcher about
        to stop (headless on SIGTERM); False if the round did not finish."""
        done = not self.logs or self._log_rounds.ask(timeout)
        now = self.clock()
        self.monitor.quiet(now, now)
        return done

    def stop(self) -> None:
        """Stop watching. Never touches the job: it keeps running."""
        self._stop.set()
        self._rearm.set()
        self._log_rounds.wake()
        if self._sampler_thread is not None:
            self._sampler_thread.stop(timeout=2.0)
        for thread in self._threads:
            thread.join(timeout=2.0)
        for tailer in self._tailers:
            tailer.close()
        if self.sampler is not None:
            self.sampler.close()

    def __enter__(self) -> LiveSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=self._guard(name, target), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guard(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not self._stop.is_set():
                try:
                    target()
                    return
                except Exception as exc:  # a source failed: say so once, retry slowly
                    self.monitor.note(f"{name} failed ({type(exc).__name__}: {exc}); retrying")
                    self._stop.wait(5.0)

        return run

    # -- sources ------------------------------------------------------------------
    def _tail_logs(self) -> None:
        tailer = self._tailer(list(self.logs))
        self._tailers.append(tailer)
        # What the files held when the session started is caught up first,
        # on the data's own clock (as replay reads it); lines that arrive
        # after that are fresh: written while we follow (``Monitor.feed_text``).
        fresh = not self.from_start
        # The catch-up is one bulk read, as replay's (``gc_policy``): the
        # collector's raise taken and given back once, not at every chunk
        # (between two chunks, young collections at the default threshold).
        catch_up = ExitStack()
        if not fresh:
            catch_up.enter_context(bulk_read())
        with catch_up:
            self._tail_rounds(tailer, fresh, catch_up)

    def _tail_rounds(self, tailer: LogTailer, fresh: bool, catch_up: ExitStack) -> None:
        """``_tail_logs``' rounds until the session stops; ``catch_up`` is
        closed once the files' backlog is read (the first round that finds
        nothing more)."""
        from .sources.logtail import Chunk

        monitor = self.monitor
        rounds = self._log_rounds
        # The wall time (monotonic) of the last complete lines read, and
        # whether the lull since then was already announced to the Monitor.
        last_data: float | None = None
        announced = True
        # A round runs from one pause to the next; a backlog read on at once
        # is still the same round (what it read counts, its start holds).
        began, grew = time.monotonic(), False
        while not self._stop.is_set():
            covered = rounds.begin()
            for item in tailer.poll():
                if isinstance(item, Chunk) and item.partial:
                    with monitor.lock:
                        monitor.feed_partial(item.path, item.text, item.first_lineno, self.clock(), time.time())
                        # A log that is one bar so far (no newline yet) has
                        # been seen too: the clock ticks from now on, or a
                        # bar that stops would never be a stall.
                        self._log_seen = True
                        self._observe()  # (issue 17, CR bars: the clock follows the redraws' times)
                elif isinstance(item, Chunk):
                    # How a caught-up file ends (file I/O) is looked at
                    # before the lock: a slow filesystem stalls this thread
                    # alone, not the dashboard or the sampler waiting on it.
                    end = None if fresh else ingest.file_end(item.path, item.text)
                    modified = self._opening_mtime(item.path) if not fresh and item.first_lineno == 1 else None
                    with monitor.lock:
                        now = self.clock()
                        if modified is not None:
                            # A file's first text in a catch-up: lines without
                            # a stamp were written by its mtime, as replay
                            # dates them (on the live clock: that long before
                            # now). Dated at the read, a log silent for hours
                            # ran the clock that far ahead of its data (the
                            # silence counted twice once it is anchored).
                            now -= max(0.0, time.time() - modified)
                        monitor.feed_text(
                            item.path, item.text, item.first_lineno, now, item.generation, fresh=fresh,
                            arrived=time.time(), end=end, lines=item.lines,
                        )
                        self._log_seen = True
                        # A caught-up file's end was written at its mtime:
                        # the clock runs on from then (its silence so far
                        # counts). Under the lock: a tick between the feed
                        # and this would read the clock before it followed.
                        self._observe(None if end is None else end.modified)
                    grew = True
                else:
                    monitor.note(item.message)
            if tailer.wait(0.0):
                continue  # a backlog: read on at once, the round is not over
            fresh = True
            catch_up.close()
            if grew:
                last_data, announced = time.monotonic(), False
            elif not announced and last_data is not None and time.monotonic() - last_data >= self.quiet_s:
                # A whole round found nothing new: the log went quiet. A
                # traceback that ended it is complete, and so are the
                # copies the other ranks were going to print.
                announced = True
                now = self.clock()
                monitor.quiet(now, now - (time.monotonic() - last_data) * self._speed())
                self._rearm.set()  # deadlines moved: the tick loop looks again
            rounds.end(covered)
            # While data flows, rounds are a little shorter: the first empty
            # one tells that the log went quiet, at most two such rounds
            # (0.8 s) after its last write. And they start that far apart,
            # not that long after the last one ended: a round that read for
            # longer found the log grown meanwhile, and the next starts at
            # once. Else a log written near the rate we read it (50k
            # lines/s) falls far behind: each round reads more, then idles
            # the whole pause on top (lag ~ pause / (1 - rate / capacity)).
            pause = self.tail_poll_s if announced else min(self.tail_poll_s, _FLOWING_POLL_S)
            if grew:
                pause -= time.monotonic() - began
            if pause > 0:
                rounds.sleep(pause)
            began, grew = time.monotonic(), False

    def _tail_samples(self) -> None:
        from .sources.logtail import Chunk
        from .sources.samples import parse_sample_line

        # Started only when samples_file is set (cast: mypy cannot follow that).
        tailer = self._tailer([cast(str, self.samples_file)])
        self._tailers.append(tailer)
        bad = 0
        # What the first round reads is history, on its own clock; what
        # comes after is written now, and goes onto the live clock.
        fresh = False
        path = cast(str, self.samples_file)
        while not self._stop.is_set():
            for item in tailer.poll():
                if not isinstance(item, Chunk):
                    self.monitor.note(item.message)
                    continue
                if item.partial:
                    continue
                batch = []
                for line in item.text.splitlines():
                    sample = parse_sample_line(line)
                    if sample is None:
                        if line.strip():
                            bad += 1
                            if bad == 1:
                                self.monitor.note(f"{self.samples_file}: skipping lines that are not GPU samples")
                        continue
                    batch.append(sample)
                if batch:
                    self._feed_side(self.monitor.feed_samples, path, batch, fresh)
            if self.monitor.side_holding(path):
                self._feed_side(self.monitor.feed_samples, path, [], fresh)
            tailer.wait(self.tail_poll_s)
            fresh = True

    def _feed_side(self, feed: Callable[..., object], path: str, batch: list[Any], fresh: bool) -> None:
        """A sample or probe file's lines to the Monitor, which puts them on
        the live clock (``Monitor.feed_samples``: held until the log's first
        text is read)."""
        with self.monitor.lock:
            with self._side_feed():
                feed(batch, path, fresh=fresh, now=self.clock(), arrived=time.time(), log_seen=self._log_seen)

    def _tail_probes(self) -> None:
        """Probe lines into ``Monitor.feed_probes``, a file's complete lines at a time.

        Each file keeps its own parser (its rank from its name, its count
        of bad lines, said once per file). A torn last line waits as a
        partial chunk until its newline comes. The default places may
        never hold a probe file, and a probe writer rotates its own: no
        "waiting for" or "rotated" notice for those. Probe
        lines arrive every few seconds per rank, so this thread polls
        (``probe_poll_s``) instead of keeping a file-event thread.
        """
        from .sources.logtail import Chunk
        from .sources.probes import ProbeParser

        tailer = self._tailer(self.probes, self.probe_poll_s, use_watchdog=False)
        self._tailers.append(tailer)
        parsers: dict[str, ProbeParser] = {}
        fresh = False  # as for the sample file (``_tail_samples``)
        while not self._stop.is_set():
            for item in tailer.poll():
                if not isinstance(item, Chunk):
                    # A writer's rotation is routine there too (a new file follows).
                    if self.probes_given or item.kind not in ("waiting", "rotated"):
                        self.monitor.note(item.message)
                    continue
                if item.partial:
                    continue
                parser = parsers.get(item.path)
                if parser is None:
                    parser = parsers[item.path] = ProbeParser(item.path)
                before = parser.bad
                batch = parser.parse_text(item.text, item.first_lineno)
                if parser.bad and not before:
                    self.monitor.note(f"{item.path}: skipping lines that are not probe lines "
                                      f"(first: line {parser.first_bad})")
                if batch:
                    self._feed_side(self.monitor.feed_probes, item.path, batch, fresh)
            for path in parsers:
                if self.monitor.side_holding(path):
                    self._feed_side(self.monitor.feed_probes, path, [], fresh)
            fresh = True
            if self._stop.wait(self.probe_poll_s):
                return

    def _tailer(self, patterns: list[str], poll_s: float | None = None, use_watchdog: bool = True) -> Any:
        """A tailer that finds appends by polling every ``tail_poll_s`` (see ``__init__``)."""
        from .sources.logtail import LogTailer

        poll = self.tail_poll_s if poll_s is None else poll_s
        return LogTailer(patterns, from_start=self.from_start, poll_interval=poll, wake_on_writes=False,
                         use_watchdog=use_watchdog)

    def _start_nvml(self) -> None:
        # Explicit indices win; else the GPUs this shell's CUDA_VISIBLE_DEVICES
        # names (a watcher started beside the job usually shares its setting).
        from .sources.nvml import GpuSampler
        from .sources.nvml_thread import SamplerThread

        self.sampler = GpuSampler(
            indices=self.gpu_indices,
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
            on_notice=self.monitor.note,
        )
        if not self.sampler.available:
            self.gpu_unavailable = self.sampler.unavailable
            self.monitor.gpu_unavailable = self.sampler.unavailable
            return
        self.monitor.gpu_info = self.sampler.gpus
        if self.record_file:
            from .sources.samples import SampleRecorder

            self._recorder = SampleRecorder(self.record_file)

        self._nvml_since = time.time()
        self._sampler_thread = SamplerThread(
            self.sampler, self.gpu_interval_s, self._deliver_samples, clock=time.time, on_error=self.monitor.note
        ).start()

    def _deliver_samples(self, batch: list[GpuSample | GpuLost]) -> None:
        """NVML's samples, stamped on this machine's clock, onto the live
        clock, or held until it follows the log.

        The live clock follows a caught-up log on the log's own clock, hours
        or a year from this machine's, but only once its first text is
        read. A sample taken before that, stamped on the bare wall clock,
        ran the Monitor's time ahead of every line of the log, and the crash
        that ended it was held until the log's clock reached the wall's
        (never, in practice: seen attaching to a finished log with the GPUs
        sampled). So samples wait for the log's first text (at most
        ``alignment.SIDE_HOLD_S``, as a GPU sample file's lines do; a watch
        without logs never waits), and each is moved by where the live clock
        is against this machine's when it is fed: its age is kept."""
        with self.monitor.lock:
            held = self._nvml_held
            if not self._log_seen and time.time() - self._nvml_since < SIDE_HOLD_S:
                held.extend(batch)
                del held[:-SIDE_HOLD_MAX]
                return
            if held:
                batch = held + batch
                self._nvml_held = []
            batch = shifted(batch, self.clock() - time.time())
            with self._side_feed():
                self.monitor.feed_samples(batch)
        if self._recorder is not None:
            self._recorder.write([s for s in batch if isinstance(s, GpuSample)])

    def _opening_mtime(self, path: str) -> float | None:
        """The file's mtime, for its first catch-up chunk (looked at outside
        the Monitor's lock: file I/O); None at another speed than the real
        one (the demo's compressed clock runs on from its reads, as
        ``FollowClock.observe`` does), or if the file cannot be looked at."""
        if self.follow is None or self.follow.speed != 1.0:
            return None
        try:
            return os.stat(path).st_mtime
        except OSError:
            return None

    def _speed(self) -> float:
        return self.follow.speed if self.follow is not None else 1.0

    def _observe(self, written: float | None = None) -> None:
        """The log was fed: the live clock follows its data (``FollowClock.observe``)."""
        if self.follow is not None:
            self.follow.observe(written)

    def _side_feed(self) -> AbstractContextManager[None]:
        """Around a feed of side data: it never moves the live clock (``FollowClock.side_feed``)."""
        return self.follow.side_feed() if self.follow is not None else nullcontext()

    def _next_tick_s(self) -> float:
        """Wall seconds to the next tick: ``tick_s``, or sooner when a
        detector's deadline falls before it (a crash whose hold or survival
        window ends in 0.3 s is sent then, not at the next whole tick)."""
        speed = self._speed()
        with self.monitor.lock:
            deadline = self.monitor.detectors.deadline()
            if deadline is None or speed <= 0:
                return self.tick_s
            wait = (deadline - self.clock()) / speed
        return min(self.tick_s, max(0.01, wait + 0.005))

    def _tick_loop(self) -> None:
        last_status = 0.0
        while True:
            self._rearm.wait(self._next_tick_s())
            self._rearm.clear()
            if self._stop.is_set():
                return
            # Read the clock under the Monitor's lock: read outside, it may
            # predate a chunk being fed right now (the first chunk of a
            # catch-up, before the clock follows the data), and the tick
            # would then jump the data's clock to the bare wall clock.
            with self.monitor.lock:
                now = self.clock()
                if self._log_seen:
                    self.monitor.tick(now)
            if self.job is None:
                continue
            if self.on_stall is not None:
                self.on_stall.step(now)
            if self.logs:
                # The lines a job wrote before it ended come before its exit
                # (and name its crash): read them before asking tmux. One
                # more poll (a stat) a second, and only with a job to watch.
                self._log_rounds.ask(timeout=1.0)
            exit_event = self._poll_exit(now)
            if exit_event is not None:
                # The job is gone: nothing more will be written. Its last
                # traceback is complete now, and its exit can name it.
                self.monitor.quiet(now, now)
                # Never before data already seen: the wrapper stamps the exit
                # on the wall clock, and the data's clock may run ahead of it
                # (the demo's compressed time, a log in another zone).
                if self.monitor.now is not None and exit_event.time < self.monitor.now:
                    exit_event = replace(exit_event, time=self.monitor.now)
                self.monitor.feed_events((exit_event,))
            if time.monotonic() - last_status >= 2.0 or exit_event is not None:
                last_status = time.monotonic()
                self.refresh_job_state()

    def _poll_exit(self, now: float) -> Any:
        """The job's exit, if it just ended; with auto-relaunch, its decision too."""
        if self.auto is None:
            return self.job.poll_exit(now, lambda: self._ended_signature(now))
        step = self.auto.step(now, lambda: self._ended_signature(now))
        if step.error:
            self.monitor.note(step.error)
        if step.relaunched:
            self.monitor.job_relaunched(now)
            self.monitor.note("auto-relaunch: the job was started again")
        decision = step.decision
        if step.exit is not None and decision is not None:
            if decision.crash_loop:
                self.monitor.raise_alert(crash_loop_alert(now, step.exit, decision.reason))
            elif decision.relaunch:
                self.monitor.note(f"auto-relaunch in {decision.delay_s:.0f} s: {decision.reason}")
            else:
                self.monitor.note(f"no auto-relaunch: {decision.reason}")
        return step.exit

    def _ended_signature(self, now: float) -> str | None:
        """The signature of the crash that ended the job, asked once its end
        is seen: its last traceback is complete then (``Monitor.quiet``;
        the parser holds one until the next line or the quiet), so the
        crash-loop guard counts the crash the alert names, not its exit
        status."""
        self.monitor.quiet(now, now)
        crash = self.monitor.last_crash
        return crash.signature if crash is not None else None

    def refresh_job_state(self) -> None:
        if self.job is None:
            return
        try:
            state = self.job.status()
        except Exception as exc:
            self.monitor.note(f"job status failed: {exc}")
            return
        self.monitor.set_job_state(state)
        if self.sampler is not None and getattr(state, "pids", None):
            self.sampler.job_pids = state.pids


def _state_dir(job: Any) -> Any:
    """Where the job keeps its records (stack dumps go beside them)."""
    from .control.spec import default_state_dir

    return getattr(getattr(job, "spec", None), "state_dir", None) or default_state_dir()


def _default_probe_globs(logs: Sequence[str], job: Any) -> list[str]:
    """``dflash-probe-*.jsonl`` beside each log and in the job's cwd."""
    from .sources.probes import discover

    spec = getattr(job, "spec", None)
    return discover((), logs, getattr(spec, "cwd", None))


def crash_loop_alert(now: float, exit_event: Any, reason: str) -> Any:
    """Auto-relaunch gave up: the same crash keeps coming back."""
    from .control.autorelaunch import crash_loop_alert as guard_alert

    return guard_alert(now, "auto-relaunch", reason, getattr(exit_event, "source", "tmux"),
                       {"signature": exit_event.signature, "code": exit_event.code})
