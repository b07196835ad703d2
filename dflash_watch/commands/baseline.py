"""`dflash-watch baseline save|show`: the reference profile of a good run.

``save`` replays the good run's logs (and GPU samples) through the same
Monitor as ``replay`` and keeps what the dashboard's ``b`` key keeps
(``Monitor.capture_baseline``: the median throughput, each GPU's memory
level and band), but over a window the user picks: ``--from``/``--to``, by
default the whole run after its warm-up, because compile and the first
steps are slower and would pull the reference down. The window is cut by
the Monitor subclass below, which drops what falls outside it before the
Monitor sees it, so ``capture_baseline`` over "all it saw" is the window.

A run that prints only samples/s or it/s (tqdm) still gets a baseline: its
rate is saved in ``throughput_tokens_per_s`` with ``throughput_unit``
saying which unit it is (CONTRACTS section 6 lets keys grow).

Limits, for now: only the run's first warm-up is cut (a relaunch inside
the window counts with its own warm-up); ``--env`` records the venv's path,
not yet its package fingerprint.
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import sys
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import fail
from .common import ClearError, SettingsError, detector_config_from, expand_logs, parse_tz, progress_pattern_from

DEFAULT_OUT = "dflash-baseline.json"
TOKENS = "tok/s"
# GPU samples waiting for the next progress line: 8 GPUs at 1 Hz for ~100
# minutes. A longer silence keeps only its last samples.
HELD_SAMPLES = 50_000


def run(args: argparse.Namespace) -> int:
    try:
        if args.baseline_command == "save":
            return _save(args)
        return _show(args)
    except ClearError as exc:
        return fail(str(exc))


# -- the window ----------------------------------------------------------------


@dataclass(slots=True)
class Window:
    """Which data a baseline is made of: [start, end], or after the warm-up."""

    start: float | None = None
    end: float | None = None
    skip_warmup: bool = True
    warmup_events: int = 5
    warmup_s: float = 60.0
    # The unit read as "tokens/s" when the run prints no tokens rate.
    unit: str = TOKENS


def _window_monitor(window: Window, **kwargs: Any) -> Any:
    """A Monitor that sees only ``window`` of the data, and measures the
    step interval and the rate units on the way."""
    from parsers.events import GpuSample, Progress, rate_of

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
                            continue
                        self.warm = True
                    event = self._measure(event)
                    while self._held:
                        yield self._held.popleft()
                elif not self.warm:
                    continue  # GPU memory during warm-up climbs: not the reference
                elif type(event) is GpuSample:
                    # Memory counts while the run makes progress: a sample
                    # waits for the next progress line, and those after the
                    # last one (the run ended, memory fell) never count.
                    self._held.append(event)
                    continue
                yield event

        def _measure(self, event: Any) -> Any:
            rate, unit = rate_of(event)
            if rate is not None:
                self.units[unit] = self.units.get(unit, 0) + 1
                if self.kept_first is None:
                    self.kept_first = event.time
                self.kept_last = event.time
            if event.step_seconds is not None and math.isfinite(event.step_seconds):
                self.step_seconds.append(event.step_seconds)
            # One log's steps are enough for the interval (ranks step together).
            source = event.source.rpartition(":")[0]
            if event.step is not None and event.clocked and self._step_source in (None, source):
                self._step_source = source
                last = self._last_step
                if last is not None and event.step > last[0] and event.time > last[1]:
                    self.step_intervals.append((event.time - last[1]) / (event.step - last[0]))
                self._last_step = (event.step, event.time)
            if window.unit != TOKENS:
                # A run without a tokens rate: its own rate stands in for it.
                # Other units (an eval bar) are left out of the series.
                keep = unit == window.unit
                event = replace(event, tokens_per_s=rate if keep else None, rate=rate if keep else None,
                                rate_unit=unit if keep else None)
            return event

    return WindowMonitor()


def capture_window(replay_window: Callable[[Window], Any], window: Window) -> tuple[Any, Window]:
    """Replay ``window`` (``replay_window`` builds a window Monitor and feeds
    it the run); again without the warm-up cut when the whole run was
    warm-up, and again reading the run's own rate as "tokens/s" when it
    prints no tokens rate. Returns the last Monitor and its window."""
    monitor = replay_window(window)
    if not monitor.units and monitor.rated_seen and window.skip_warmup:
        window = replace(window, skip_warmup=False)
        sys.stderr.write("dflash-watch: the run is no longer than its warm-up; the baseline covers all of it\n")
        monitor = replay_window(window)
    if monitor.units and TOKENS not in monitor.units:
        window = replace(window, unit=max(monitor.units, key=monitor.units.__getitem__))
        monitor = replay_window(window)
    return monitor, window


def _median(values: array) -> float | None:
    if not values:
        return None
    import numpy as np

    return float(np.median(np.frombuffer(values, dtype=np.float64)))


# -- save ------------------------------------------------------------------------


def parse_time(text: str, tz: Any, flag: str) -> float:
    """``--from``/``--to``: seconds since the epoch, or an ISO 8601 time
    (naive: in ``tz``, else local time, as log timestamps are read)."""
    from datetime import datetime

    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(value):
            return value
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SettingsError(
            f"{flag} {text!r}: not a time (ISO 8601 like 2026-11-29T10:00:00, or seconds since the epoch)"
        ) from None
    if when.tzinfo is None and tz is not None:
        when = when.replace(tzinfo=tz)
    return when.timestamp()


def _expand(patterns: tuple[str, ...]) -> list[str]:
    """The config's logs: globs as ``watch`` reads them, each matching something."""
    for pattern in patterns:
        if glob.has_magic(pattern) and not glob.glob(os.path.expanduser(pattern)):
            raise SettingsError(f"logs {pattern!r} in the config match no file")
    return expand_logs(patterns)


def _save(args: argparse.Namespace) -> int:
    from ..baseline import Baseline, save_baseline
    from ..config import load_config
    from ..replay import ReplayInputError, check_inputs, replay

    config = load_config(args.config)
    tz_name = args.tz or config.tz
    tz = parse_tz(tz_name)
    detector_config = detector_config_from(config.detectors, tz_name if tz is not None else None)
    pattern = progress_pattern_from(config.progress_regex)
    logs = list(args.logs) or _expand(config.logs)
    if not logs:
        return fail("no logs to make a baseline from: name them (baseline save LOG ...) "
                    "or set logs in the config")
    samples = list(args.gpu_samples)
    if not samples:
        for candidate in (config.gpu.samples_file, config.gpu.record_file):
            if candidate and os.path.isfile(os.path.expanduser(candidate)):
                samples = [os.path.expanduser(candidate)]
                break
    start = parse_time(args.from_time, tz, "--from") if args.from_time else None
    end = parse_time(args.to_time, tz, "--to") if args.to_time else None
    if start is not None and end is not None and end <= start:
        return fail(f"--to {args.to_time} is not after --from {args.from_time}")
    venv = None
    if args.env:
        venv = Path(args.env).expanduser()
        if not venv.is_dir():
            return fail(f"--env {args.env}: not a directory (the run's virtual environment)")
    out = args.out or config.baseline_file or DEFAULT_OUT

    window = Window(
        start=start,
        end=end,
        skip_warmup=start is None,
        warmup_events=detector_config.throughput_warmup_events,
        warmup_s=detector_config.throughput_warmup_s,
    )
    notices: list[str] = []

    def replay_window(w: Window) -> Any:
        monitor = _window_monitor(
            w, detector_config=detector_config, tz=tz, progress_pattern=pattern, keep_lines=0,
            tokens_per_step=config.run.tokens_per_step, tokens_per_sample=config.run.tokens_per_sample,
        )
        notices[:] = replay(logs, gpu_samples=samples, monitor=monitor, tz=tz, progress_pattern=pattern).notices
        return monitor

    try:
        check_inputs([*logs, *samples])
        monitor, window = capture_window(replay_window, window)
    except ReplayInputError as exc:
        return fail(str(exc))
    for notice in notices:
        sys.stderr.write(f"dflash-watch: {notice}\n")
    first, last = monitor.kept_first, monitor.kept_last
    captured = None
    if first is not None and last is not None:
        captured = monitor.capture_baseline(max(last - first, 0.0))
    if captured is None:
        where = " between --from and --to" if start is not None or end is not None else ""
        named = ", ".join(logs) if len(logs) <= 3 else f"{logs[0]} and {len(logs) - 1} more logs"
        return fail(f"no throughput in {named}{where}: no progress line with a rate (tok/s, it/s, samples/s)")

    extra = dict(captured.extra)
    extra["window"] = {"from": first, "to": last}
    if window.unit != TOKENS:
        extra["throughput_unit"] = window.unit
    interval = _median(monitor.step_intervals) or _median(monitor.step_seconds)
    if interval is not None:
        extra["step_interval_s"] = interval
    if venv is not None:
        extra["venv"] = str(venv.resolve())
    extra["logs"] = [os.path.abspath(p) for p in logs]
    baseline = Baseline(captured.throughput_tokens_per_s, extra)
    try:
        save_baseline(baseline, out)
    except OSError as exc:
        return fail(f"cannot write {out}: {exc.strerror or exc}")
    print(f"saved {out}: {_rate(baseline)} over {_span(first, last, tz)}")
    return 0


# -- show ------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    from ..baseline import load_baseline

    path = args.path
    if path is None:
        from ..config import load_config

        path = load_config(args.config).baseline_file or DEFAULT_OUT
    tz = parse_tz(args.tz)
    baseline = load_baseline(path)
    sys.stdout.write("\n".join(describe(baseline, path, tz)) + "\n")
    return 0


def describe(baseline: Any, path: str, tz: Any = None) -> list[str]:
    """A baseline as lines for a person; unexpected shapes are shown raw,
    never a traceback (the file may come from a newer version)."""
    import json

    extra = dict(baseline.extra)
    rows: list[tuple[str, str]] = [("throughput", _rate(baseline))]
    window = extra.pop("window", None)
    if isinstance(window, dict) and _is_num(window.get("from")) and _is_num(window.get("to")):
        rows.append(("window", _span(window["from"], window["to"], tz)))
    elif window is not None:
        extra["window"] = window
    elif _is_num(extra.get("window_s")) and _is_num(extra.get("captured_at")):
        # Saved by the dashboard's `b` key: the last window_s before it was pressed.
        rows.append(("window", _span(extra["captured_at"] - extra["window_s"], extra["captured_at"], tz)))
    interval = extra.pop("step_interval_s", None)
    if _is_num(interval):
        rows.append(("step interval", f"{interval:.3g} s"))
    elif interval is not None:
        extra["step_interval_s"] = interval
    extra.pop("throughput_unit", None)
    extra.pop("window_s", None)
    memory = extra.pop("gpu_memory", None)
    lines = [f"baseline {_printable(str(path))}"]
    gpu_rows: list[tuple[str, str]] = []
    if isinstance(memory, dict):
        from detectors.config import fmt_gib

        for gpu, m in sorted(memory.items(), key=lambda kv: (len(str(kv[0])), str(kv[0]))):
            if isinstance(m, dict) and _is_num(m.get("level_bytes")) and _is_num(m.get("band_bytes")):
                gpu_rows.append((f"GPU {_printable(str(gpu))} memory",
                                 f"{fmt_gib(m['level_bytes'])}, band {fmt_gib(m['band_bytes'], 2)}"))
            else:
                gpu_rows.append((f"GPU {_printable(str(gpu))} memory", _printable(json.dumps(m))))
    elif memory is not None:
        extra["gpu_memory"] = memory
    venv = extra.pop("venv", None)
    if isinstance(venv, str):
        rows.append(("environment", _printable(venv)))
    elif venv is not None:
        extra["venv"] = venv
    logs = extra.pop("logs", None)
    if isinstance(logs, list) and all(isinstance(x, str) for x in logs):
        rows.append(("logs", _printable(", ".join(logs))))
    elif logs is not None:
        extra["logs"] = logs
    extra.pop("captured_at", None)
    rows.extend(gpu_rows)
    rows.extend((_printable(str(k)), _printable(json.dumps(v))) for k, v in sorted(extra.items()))
    width = max(len(name) for name, _ in rows)
    lines.extend(f"  {name:<{width}}  {value}" for name, value in rows)
    return lines


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _printable(text: str) -> str:
    """Text from a file is data: control characters are shown, not obeyed."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _rate(baseline: Any) -> str:
    from detectors.config import fmt_rate

    unit = baseline.extra.get("throughput_unit", TOKENS)
    value = baseline.throughput_tokens_per_s
    if unit == TOKENS:
        return fmt_rate(value)
    return f"{value:.3g} {_printable(str(unit))}"


def _span(first: float, last: float, tz: Any) -> str:
    from datetime import datetime

    from detectors.config import fmt_duration

    try:
        a = datetime.fromtimestamp(first, tz)
        b = datetime.fromtimestamp(last, tz)
    except (OverflowError, OSError, ValueError):
        return f"t={first:.0f} to t={last:.0f}"
    end = b.strftime("%H:%M:%S") if a.date() == b.date() else b.strftime("%Y-%m-%d %H:%M:%S")
    return f"{a.strftime('%Y-%m-%d %H:%M:%S')} to {end} ({fmt_duration(last - first)})"
