"""The window a baseline (or a current profile) is measured over.

``baseline save`` and ``baseline diff`` replay a run's logs through the same
Monitor as ``replay``, but keep only the window the user picks (``--from``
/``--to``, by default the whole run after its warm-up, because compile and
the first steps are slower and would pull the reference down). The window
is cut by the Monitor subclass below, which drops what falls outside it
before the Monitor sees it, so ``capture_baseline`` over "all it saw" is
the window. On the way it measures what the Monitor does not keep: the
step interval, every rate (for the spread), the warm-up's rate (how slow
the first steps were), padding efficiency from log lines and probe lines,
and the probe's allocator-retry and recompile counters.

The command faces (``commands/baseline.py``, ``commands/baseline_diff.py``)
choose the window from their arguments and feed the run; what a window is
and how it is cut lives here, beside the profile it becomes.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dflash_watch.parsers.events import TOK_S

# GPU samples waiting for the next progress line: 8 GPUs at 1 Hz for ~100
# minutes. A longer silence keeps only its last samples.
HELD_SAMPLES = 50_000


@dataclass(slots=True)
class Window:
    """Which data a baseline is made of: [start, end], or after the warm-up."""

    start: float | None = None
    end: float | None = None
    skip_warmup: bool = True
    warmup_events: int = 5
    warmup_s: float = 60.0
    # The unit read as "tokens/s" when the run prints no tokens rate.
    unit: str = TOK_S
    # ``baseline diff``: crashes during the warm-up still count (an early
    # FX-tracing crash is a symptom to explain).
    keep_crashes: bool = False


@dataclass(slots=True)
class ProbeCounter:
    """A cumulative counter of one rank's probe lines: its rise in the window
    (a restarted process counts from 0 again; its new count adds on)."""

    last: int | None = None
    rise: int = 0

    def see(self, value: int | None) -> None:
        if value is None:
            return
        if self.last is not None:
            self.rise += value - self.last if value >= self.last else value
        self.last = value


def window_monitor(window: Window, **kwargs: Any) -> Any:
    """A Monitor that sees only ``window`` of the data, and measures the
    step interval, the rates and the padding on the way."""
    from dflash_watch.parsers.events import Crash, GpuSample, PaddingReport, ProbeSample, Progress, rate_of

    from ..monitor import Monitor

    class WindowMonitor(Monitor):
        def __init__(self) -> None:
            super().__init__(**kwargs)
            self.first_progress: float | None = None
            self.progress_seen = 0
            self.warm = not window.skip_warmup
            self.kept_first: float | None = None
            self.kept_last: float | None = None
            self.units: dict[str, int] = {}
            self.rated_seen = 0
            self.step_intervals = array("d")
            self.step_seconds = array("d")
            self.rates = array("d")
            self.warmup_rates = array("d")
            self.padding_reports = array("d")
            self.probe_tokens = 0
            self.probe_padded = 0
            self.probe_retries: dict[Any, ProbeCounter] = {}
            self.probe_recompiles: dict[Any, ProbeCounter] = {}
            self._step_source: str | None = None
            self._last_step: tuple[int, float] | None = None
            self._held: deque[Any] = deque(maxlen=HELD_SAMPLES)

        def feed_events(self, events: Any) -> list[Any]:
            return super().feed_events(self._keep(events))

        def _keep(self, events: Any) -> Any:
            for event in events:
                t = event.time
                if window.end is not None and t > window.end:
                    continue
                if window.start is not None and t < window.start:
                    if not (window.keep_crashes and type(event) is Crash):
                        continue
                if type(event) is Progress:
                    if event.rate is not None or event.tokens_per_s is not None:
                        self.rated_seen += 1
                    if not self.warm:
                        self.progress_seen += 1
                        if self.first_progress is None:
                            self.first_progress = t
                        if (self.progress_seen <= window.warmup_events
                                or t - self.first_progress < window.warmup_s):
                            rate, unit = rate_of(event)
                            if rate is not None and unit == window.unit and math.isfinite(rate):
                                self.warmup_rates.append(rate)
                            continue
                        self.warm = True
                    event = self._measure(event)
                    while self._held:
                        yield self._held.popleft()
                elif not self.warm:
                    if window.keep_crashes and type(event) is Crash:
                        yield event
                    continue  # GPU memory during warm-up climbs: not the reference
                elif type(event) is GpuSample:
                    # Memory counts while the run makes progress: a sample
                    # waits for the next progress line, and those after the
                    # last one (the run ended, memory fell) never count.
                    self._held.append(event)
                    continue
                elif type(event) is PaddingReport:
                    if math.isfinite(event.efficiency):
                        self.padding_reports.append(event.efficiency)
                elif type(event) is ProbeSample:
                    self._probe(event)
                yield event

        def _probe(self, event: Any) -> None:
            if event.tokens is not None and event.padded_tokens and event.padded_tokens > 0:
                self.probe_tokens += event.tokens
                self.probe_padded += event.padded_tokens
            self.probe_retries.setdefault(event.rank, ProbeCounter()).see(event.alloc_retries)
            self.probe_recompiles.setdefault(event.rank, ProbeCounter()).see(event.recompiles)

        def _measure(self, event: Any) -> Any:
            rate, unit = rate_of(event)
            if rate is not None:
                self.units[unit] = self.units.get(unit, 0) + 1
                if self.kept_first is None:
                    self.kept_first = event.time
                self.kept_last = event.time
                if unit == window.unit and math.isfinite(rate):
                    self.rates.append(rate)
            if event.step_seconds is not None and math.isfinite(event.step_seconds):
                self.step_seconds.append(event.step_seconds)
            # One log's steps are enough for the interval (ranks step together).
            source = event.source.rpartition(":")[0]
            if event.step is not None and event.clocked and self._step_source in (None, source):
                self._step_source = source
                last = self._last_step
                if last is None or event.step <= last[0] or event.time < last[1]:
                    self._last_step = (event.step, event.time)  # the first, or steps or time went back
                elif event.time > last[1]:
                    self.step_intervals.append((event.time - last[1]) / (event.step - last[0]))
                    self._last_step = (event.step, event.time)
                # Else at the time of the last one counted: tqdm's elapsed
                # counter is in whole seconds, so 33 steps share each second.
                # The interval runs from the first of them, not the last (1 s
                # over the 1-4 steps since the last redraw read 0.25-0.5 s a
                # step where they took 0.03 s).
            if window.unit != TOK_S:
                # A run without a tokens rate: its own rate stands in for it.
                # Other units (an eval bar) are left out of the series.
                keep = unit == window.unit
                event = replace(event, tokens_per_s=rate if keep else None, rate=rate if keep else None,
                                rate_unit=unit if keep else None)
            return event

    return WindowMonitor()


def capture_window(
    replay_window: Callable[[Window], Any], window: Window, whole: str = "the baseline covers all of it"
) -> tuple[Any, Window]:
    """Replay ``window`` (``replay_window`` builds a window Monitor and feeds
    it the run); again without the warm-up cut when the whole run was
    warm-up (``whole`` says what that means to the command), and again
    reading the run's own rate as "tokens/s" when it prints no tokens rate.
    Returns the last Monitor and its window."""
    monitor = replay_window(window)
    if not monitor.units and monitor.rated_seen and window.skip_warmup:
        window = replace(window, skip_warmup=False)
        sys.stderr.write(f"dflash-watch: the run is no longer than its warm-up; {whole}\n")
        monitor = replay_window(window)
    if monitor.units and TOK_S not in monitor.units:
        window = replace(window, unit=max(monitor.units, key=monitor.units.__getitem__))
        monitor = replay_window(window)
    return monitor, window
