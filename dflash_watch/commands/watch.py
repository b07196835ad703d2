"""`dflash-watch watch`: the dashboard beside a live run.

Wiring only: settings -> Monitor -> (optional) Job -> LiveSession threads
-> the Textual app. Quitting stops the watcher's threads and nothing else:
the job lives in tmux and keeps running.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_SESSION = "dflash-train"


def _fail(message: str) -> int:
    print(f"dflash-watch: {message}", file=sys.stderr)
    return 2


def _wants_job(args: argparse.Namespace, config: Any) -> bool:
    """Job control when the user named a job: a command, or a session of their own."""
    run = config.run
    return bool(getattr(args, "cmd", None) or getattr(args, "session", None) or run.command
                or run.session != DEFAULT_SESSION)


def _gpu_holders(monitor: Any):
    """(gpu, pid, used_bytes, name) from the Monitor's latest samples, for the relaunch preflight."""

    def holders() -> list[tuple[int, int, int, str]]:
        rows = []
        for gpu in monitor.gpus.gpus:
            last = monitor.gpus.last(gpu)
            for p in (last.processes or ()) if last else ():
                rows.append((gpu, p.pid, p.used_bytes, p.name))
        return rows

    return holders


def build_job(args: argparse.Namespace, config: Any, monitor: Any) -> tuple[Any, str | None]:
    """(job, why there is no job control) for the dashboard."""
    if not _wants_job(args, config):
        return None, None
    from ..control.cli_actions import UsageError, spec_from_args
    from ..control.job import Job

    spec_args = argparse.Namespace(**vars(args))
    spec_args.config = config.path
    try:
        spec = spec_from_args(spec_args)
    except UsageError as exc:
        raise ValueError(str(exc)) from None
    job = Job(spec, gpu_holders=_gpu_holders(monitor))
    if not job.available:
        return None, "job control off: tmux not found on PATH (install tmux; monitoring still works)"
    return job, None


def run(args: argparse.Namespace) -> int:
    from .common import ClearError, load_run_settings

    try:
        settings = load_run_settings(args)
    except ClearError as exc:
        return _fail(str(exc))
    config = settings.config

    from ..live import LiveSession
    from ..monitor import GPU_SAMPLING_OFF, Monitor

    monitor = Monitor(
        detector_config=settings.detector_config,
        baseline=settings.baseline,
        tz=settings.tz,
        progress_pattern=settings.progress_pattern,
    )
    try:
        job, control_note = build_job(args, config, monitor)
    except ValueError as exc:
        return _fail(str(exc))
    samples = config.gpu.samples_file
    if not config.gpu.enabled and not samples:
        monitor.gpu_unavailable = GPU_SAMPLING_OFF
    session = LiveSession(
        monitor,
        logs=config.logs,
        samples_file=samples,
        use_nvml=config.gpu.enabled,
        gpu_interval_s=config.gpu.interval_s,
        gpu_indices=config.gpu.indices,
        record_file=config.gpu.record_file,
        job=job,
        auto_relaunch=_auto_relaunch(config),
        alerts_file=config.alerts_file,
    )

    from ..tui.app import DashboardApp

    app = DashboardApp(
        monitor,
        job=job,
        control_note=control_note,
        session=session,
        baseline_path=config.baseline_file,
        tz=settings.tz,
        logs_configured=bool(config.logs),
    )
    _leave_on_hangup()
    session.start()
    try:
        app.run()
    finally:
        session.stop()
    return 0


def _auto_relaunch(config: Any) -> Any:
    """The opt-in auto-relaunch policy of ``[run]``, else None."""
    if not config.run.auto_relaunch:
        return None
    from ..control.autorelaunch import AutoRelaunchConfig, AutoRelaunchPolicy

    return AutoRelaunchPolicy(AutoRelaunchConfig(enabled=True, max_restarts=config.run.max_restarts))


def _leave_on_hangup() -> None:
    """A closed terminal (SIGHUP) or a kill (SIGTERM) ends the watcher at
    once, whatever its event loop is doing (a stuck redraw must not leave
    an orphan drawing into a dead terminal). Nothing needs undoing: the job
    lives in tmux and the watcher holds no state that a restart does not
    rebuild (tests/e2e/test_watch_tmux.py checks the job lives on)."""
    import os
    import signal

    def leave(signum: int, _frame: object) -> None:
        os._exit(128 + signum)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, leave)
