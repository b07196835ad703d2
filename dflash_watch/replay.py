"""Replay a finished run through the same Monitor, on the data's own clock.

Each input file becomes a lazy, time-ordered stream of events (parsed chunk
by chunk, so memory does not grow with the log); the streams are merged by
time and fed to one Monitor, which inserts the detectors' deadlines as
ticks. Lines before a file's first timestamp take that stamp; a file with
none runs on tqdm's elapsed counter or its step times, from the file's
modification time (the only honest start there is).

Events go to the Monitor a batch at a time (a chunk's worth), not one by
one: the per-call cost would otherwise be paid ~100k times per million
lines. With a single input there is nothing to merge, and the chunks'
batches go straight in. A file is read by ``log_batches`` (its own home);
for a command, large files are read by it in forked children while this
process judges (``parse_ahead``).
"""

from __future__ import annotations

import heapq
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any, TextIO

from dflash_watch.detectors.base import Alert
from dflash_watch.parsers.events import Event
from dflash_watch.parsers.progress.hints import LIGHTNING_HINT

from .gc_policy import bulk_read
from .log_batches import ReplayInputError as ReplayInputError
from .log_batches import log_batches as log_batches
from .log_batches import log_events as log_events
from .monitor import Monitor
from .parse_ahead import chosen, forked_batches
from .sources.probes import ProbeParser, read_probe_file
from .sources.samples import SampleParser, read_sample_file
from .text_files import not_text


@dataclass(slots=True)
class ReplayResult:
    monitor: Monitor
    alerts: list[Alert] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def check_inputs(paths: Sequence[str]) -> None:
    for path in paths:
        if not os.path.exists(path):
            raise ReplayInputError(f"{path}: no such file")
        if os.path.isdir(path):
            raise ReplayInputError(f"{path}: is a directory, not a log file")
        if not os.path.isfile(path):
            # A FIFO would block the open until a writer comes, /dev/zero never ends.
            raise ReplayInputError(f"{path}: not a regular file (a FIFO or a device); save it to a file first")
        if not os.access(path, os.R_OK):
            raise ReplayInputError(f"{path}: permission denied")
        why = not_text(path)
        if why:
            raise ReplayInputError(f"{path}: not a text log ({why})")


def replay(
    logs: Sequence[str],
    *,
    gpu_samples: Sequence[str] = (),
    probes: Sequence[str] = (),
    monitor: Monitor | None = None,
    tz: Any = None,
    progress_pattern: Any = None,
    on_alert: Callable[[Alert], None] | None = None,
    parse_ahead: bool = False,
) -> ReplayResult:
    """Replay ``logs`` (with GPU samples and probe lines) through ``monitor``.

    ``parse_ahead``: large logs are parsed in forked children while this
    process judges (``parse_ahead.chosen``): the same alerts, sooner where
    a CPU is spare. Only for a caller with no other thread (the command)."""
    check_inputs([*logs, *gpu_samples, *probes])
    monitor = monitor or Monitor(tz=tz, progress_pattern=progress_pattern, keep_lines=0)
    result = ReplayResult(monitor)
    ends: list[float] = []
    batches: Iterable[list[Event]]
    probe_parsers = [ProbeParser(p) for p in probes]
    sample_parsers: list[SampleParser] = []
    ahead = chosen(logs) if parse_ahead else set()
    if len(logs) == 1 and not gpu_samples and not probes:
        read = forked_batches if ahead else log_batches
        batches = read(logs[0], tz=tz, progress_pattern=progress_pattern, notices=result.notices, ends=ends)
    else:
        streams: list[Iterator[Event]] = [
            chain.from_iterable(
                (forked_batches if i in ahead else log_batches)(
                    p, tz=tz, progress_pattern=progress_pattern, notices=result.notices, ends=ends
                )
            )
            for i, p in enumerate(logs)
        ]
        sample_parsers = [SampleParser(path=p) for p in gpu_samples]
        streams.extend(read_sample_file(p, parser) for p, parser in zip(gpu_samples, sample_parsers))
        # Probe lines go through feed_events like any event: Monitor.feed_probes
        # is feed_events, and one merged batch keeps the time order across kinds.
        streams.extend(read_probe_file(p, parser) for p, parser in zip(probes, probe_parsers))
        merged = heapq.merge(*streams, key=_event_time) if len(streams) > 1 else iter(streams[0] if streams else ())
        batches = iter(lambda: list(islice(merged, _MERGED_BATCH)), [])
    feed = monitor.feed_events
    with bulk_read():
        for batch in batches:
            for alert in feed(batch):
                result.alerts.append(alert)
                if on_alert is not None:
                    on_alert(alert)
    if monitor.probe_samples:  # the probe reported the steps that the bar did not
        result.notices[:] = [n for n in result.notices if not n.endswith(LIGHTNING_HINT)]
    parsers: list[SampleParser | ProbeParser] = [*sample_parsers, *probe_parsers]
    for parser in parsers:
        summary = parser.summary()
        if summary:
            result.notices.append(summary)
            monitor.note(summary)
    # The data ends at the last timestamp of any file, not at its last
    # event: live, the clock would have reached it (and a silence that long
    # judged) while those lines arrived.
    if ends and monitor.now is not None and max(ends) > monitor.now:
        for alert in monitor.tick(max(ends)):
            result.alerts.append(alert)
            if on_alert is not None:
                on_alert(alert)
    for alert in monitor.finish():
        result.alerts.append(alert)
        if on_alert is not None:
            on_alert(alert)
    return result


_MERGED_BATCH = 1024  # merged events per Monitor call


def _event_time(event: Event) -> float:
    return event.time


def print_json_lines(alert: Alert, out: TextIO = sys.stdout) -> None:
    out.write(alert.to_json() + "\n")
