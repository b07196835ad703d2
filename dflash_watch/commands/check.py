"""`dflash-watch check`: one look at a run, for cron, CI and shell scripts.

Reads what the logs (GPU sample file, probe files) hold now through the same
pipeline as replay, judges the silence since the last line up to now on the
wall clock (a run whose log stopped an hour ago is stalled, not healthy),
asks tmux about the job when a session is named, and prints what is firing.
Exit 0 healthy, 1 alerts firing, 2 could not check (CONTRACTS section 1).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..detectors.base import Alert
    from ..monitor import Monitor


def _describe(alert: Any) -> str:
    where = f" gpu {alert.gpu}" if alert.gpu is not None else ""
    kind = f" {alert.kind}" if alert.kind else ""
    first = alert.message.splitlines()[0] if alert.message else ""
    return f"{alert.severity.upper():8} {alert.detector}{kind}{where}: {first} ({alert.source})"


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from .common import ClearError, expand_logs, load_run_settings, monitor_kwargs, probe_files

    out = out or sys.stdout
    err = err or sys.stderr

    def fail(message: str) -> int:
        print(f"dflash-watch: could not check: {message}", file=err)
        return 2

    try:
        settings = load_run_settings(args)
    except ClearError as exc:
        return fail(str(exc))
    config = settings.config
    logs = expand_logs(config.logs)
    probes = probe_files(settings, logs)
    if not logs and not config.gpu.samples_file and not probes:
        if config.logs:
            return fail(f"no file matches {', '.join(config.logs)}")
        return fail("nothing to read: pass --log PATH (or set logs in the config)")

    from ..monitor import Monitor
    from ..replay import ReplayInputError, check_inputs, replay

    try:
        check_inputs([*logs, *([config.gpu.samples_file] if config.gpu.samples_file else []), *probes])
    except ReplayInputError as exc:  # a FIFO or /dev/zero: at once, not a hang; binary data
        return fail(str(exc))

    monitor = Monitor(
        **monitor_kwargs(settings),
        keep_lines=0,
        keep_history=False,
    )
    samples = [config.gpu.samples_file] if config.gpu.samples_file else []
    try:
        replay(logs, gpu_samples=samples, probes=probes, monitor=monitor, parse_ahead=True)
    except ReplayInputError as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or ''}: {exc.strerror or exc}")
    now = _data_now(monitor, logs, time.time())
    if monitor.now is not None and now > monitor.now:
        monitor.tick(now)  # the silence since the last line, up to now
    job_line = _job(args, config, monitor, now)
    firing = [_silence_up_to(alert, now) for alert in monitor.alerts.firing()]
    if getattr(args, "json", False):
        for alert in firing:
            out.write(alert.to_json() + "\n")
    else:
        for alert in firing:
            out.write(_describe(alert) + "\n")
        if job_line:
            out.write(job_line + "\n")
        if not firing:
            out.write(f"healthy: no alert firing ({monitor.progress_events} progress lines read)\n")
        elif not _unhealthy(firing):
            out.write(f"healthy: only information firing ({monitor.progress_events} progress lines read)\n")
    out.flush()
    return 1 if _unhealthy(firing) else 0


def _unhealthy(firing: list[Alert]) -> bool:
    """Whether a warning or critical alert fires. An ``info`` one is news,
    not trouble: a job that exited cleanly (or was stopped as asked) is a
    healthy run, and a cron job's ``check`` must not page on it."""
    return any(alert.severity != "info" for alert in firing)


def _data_now(monitor: Monitor, logs: list[str], wall: float) -> float:
    """Now, on the logs' own clock: their last event time plus how long ago
    the newest of them was last written (its mtime, on this machine's
    clock, as the wall time is). A log whose stamps run hours behind this
    machine's (another zone, a wrong clock) was a 3-hour stall when ticked
    at the wall time, however fresh its last line; one whose stamps run
    ahead was never ticked at all, however long it had been silent. With
    no event or no file to stat: the wall time, as before."""
    if monitor.now is None:
        return wall
    written = []
    for path in logs:
        try:
            written.append(os.stat(path).st_mtime)
        except OSError:
            continue
    if not written:
        return wall
    return monitor.now + max(0.0, wall - max(written))


def _silence_up_to(alert: Any, now: float) -> Any:
    """A firing stall as of ``now``: the detector fired when the threshold
    passed (2 min after the last step), but a check looks at the run now,
    and a log silent for 2.5 days must say 2.5 days."""
    evidence = alert.evidence or {}
    last = evidence.get("last_progress")
    old = evidence.get("silence_s")
    if alert.detector != "stall" or not isinstance(last, (int, float)) or not isinstance(old, (int, float)):
        return alert
    silence = now - last
    if silence <= old:
        return alert
    from dataclasses import replace

    from dflash_watch.detectors.config import fmt_duration

    message = alert.message.replace(f"no progress for {fmt_duration(old)}", f"no progress for {_long(silence)}", 1)
    return replace(alert, message=message, evidence={**evidence, "silence_s": silence})


def _long(seconds: float) -> str:
    """A duration as a person says it: days past two days, else ``fmt_duration``."""
    from dflash_watch.detectors.config import fmt_duration

    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    return fmt_duration(seconds)


def _job(args: argparse.Namespace, config: Any, monitor: Monitor, now: float) -> str | None:
    """With a session named: the job's exit becomes a process_exit alert; its state a line."""
    from .common import SettingsError
    from .live_setup import build_job

    try:
        job, note = build_job(args, config, monitor)
    except SettingsError as exc:
        return f"job: {exc}"
    if job is None:
        return note and f"job: {note}"
    crash = monitor.last_crash
    exit_event = job.poll_exit(now, crash.signature if crash is not None else None)
    if exit_event is not None:
        monitor.feed_events((exit_event,))
    try:
        state = job.status()
    except Exception as exc:  # tmux gone: say so, the log verdict stands
        return f"job: status unknown ({exc})"
    return f"job: {state.state}" + (f" ({state.message})" if getattr(state, "message", "") else "")
