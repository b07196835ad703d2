"""The live session that `watch` and `headless` share, built once.

`headless` is `watch` with the screen taken away (DESIGN: one code path, so
a fix to one is a fix to both): the same settings, the same Monitor, the
same job control and the same LiveSession threads. Only what consumes the
alerts differs: the Textual app, or JSON lines on stdout.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .common import SettingsError, load_run_settings, monitor_kwargs, probe_patterns, wants_job

if TYPE_CHECKING:
    from ..monitor import AlertListener, Monitor


class _Hold(Protocol):
    """``StallStacks``: holds a stall alert for the hung job's stacks."""

    def hold(self, listener: AlertListener) -> AlertListener: ...

    def flush(self, timeout: float) -> None: ...


class _Gate(Protocol):
    """``AlertHistory``: lets through only the alerts it did not hold before this start."""

    def gate(self, listener: AlertListener, skipped: AlertListener | None = None) -> AlertListener: ...


@dataclass(slots=True)
class LiveSetup:
    """Everything a live view needs, not yet started."""

    settings: Any
    monitor: Monitor
    session: Any
    job: Any
    control_note: str | None
    # What consumes alerts besides the view: the alert history, the sink
    # dispatcher, the metrics exporter. Each has ``close(timeout)``;
    # ``close`` calls them, in this order.
    outputs: list[Any] = field(default_factory=list)

    @property
    def stacks(self) -> _Hold | None:
        stacks: _Hold | None = getattr(self.session, "stacks", None)
        return stacks

    @property
    def history(self) -> _Gate | None:
        history: _Gate | None = getattr(self.session, "_history", None)
        return history

    def close(self, timeout: float = 5.0) -> None:
        """After the session stopped: let the outputs deliver what is pending
        (a stall alert still held for its stacks first, so it is not lost)."""
        stacks = self.stacks
        if stacks is not None:
            stacks.flush(timeout)
        for output in self.outputs:
            try:
                output.close(timeout)
            except Exception as exc:  # noqa: BLE001 - leaving must not fail
                self.monitor.note(f"while stopping {type(output).__name__}: {type(exc).__name__}: {exc}")

    def subscribe_output(self, listener: AlertListener, skipped: AlertListener | None = None) -> None:
        """Subscribe an output (headless's stdout, the sinks) as ``fresh`` composes it."""
        self.monitor.subscribe(self.fresh(listener, skipped))

    def fresh(self, listener: AlertListener, skipped: AlertListener | None = None) -> AlertListener:
        """``listener`` as every output hears the Monitor, composed here and nowhere else.

        Outside, the alert history's gate: the alerts already in the history
        when the watcher started are not printed or sent again (a restart;
        ``skipped`` gets them, on the time they were recorded with). Inside,
        ``StallStacks.hold``: a stall alert waits (briefly) for the hung
        job's stacks. The hold finds the capture that ``StallStacks``
        started for the very alert it is handed, so ``StallStacks`` must
        hear each alert first: it is subscribed when the session is built,
        and that is checked here, before the output is subscribed after it
        (a ``RuntimeError`` otherwise: a stall page would go out at once,
        without its stacks, and nothing else would say why)."""
        stacks = self.stacks
        if stacks is not None:
            if not self.monitor.listens(stacks):
                raise RuntimeError("StallStacks is not subscribed to the Monitor: it must be, before the "
                                   "outputs that hold the stall alert for it")
            listener = stacks.hold(listener)
        history = self.history
        return listener if history is None else history.gate(listener, skipped)


def _gpu_holders(monitor: Monitor):
    """(gpu, pid, used_bytes, name) from the Monitor's latest samples, for the relaunch preflight."""

    def holders() -> list[tuple[int, int, int, str]]:
        rows = []
        for gpu in monitor.gpus.gpus:
            last = monitor.gpus.last(gpu)
            for p in (last.processes or ()) if last else ():
                rows.append((gpu, p.pid, p.used_bytes, p.name))
        return rows

    return holders


def build_job(args: argparse.Namespace, config: Any, monitor: Monitor) -> tuple[Any, str | None]:
    """(job, why there is no job control) for a live view."""
    if not wants_job(args, config):
        return None, None
    from ..control.cli_actions import UsageError, spec_from_args
    from ..control.job import Job

    spec_args = argparse.Namespace(**vars(args))
    spec_args.config = config.path
    try:
        spec = spec_from_args(spec_args)
    except UsageError as exc:
        raise SettingsError(str(exc)) from None
    job = Job(spec, gpu_holders=_gpu_holders(monitor))
    if not job.available:
        return None, "job control off: tmux not found on PATH (install tmux; monitoring still works)"
    return job, None


def _guard(config: Any) -> Any:
    """The crash-loop guard of ``[run]``, shared by auto-relaunch and on_stall."""
    from ..control.autorelaunch import AutoRelaunchConfig

    run = config.run
    return AutoRelaunchConfig(enabled=run.auto_relaunch, max_restarts=run.max_restarts,
                              crash_loop_count=run.crash_loop_count, crash_loop_window_s=run.crash_loop_window_s)


def _auto_relaunch(config: Any) -> Any:
    """The opt-in auto-relaunch policy of ``[run]``, else None."""
    if not config.run.auto_relaunch:
        return None
    from ..control.autorelaunch import AutoRelaunchPolicy

    return AutoRelaunchPolicy(_guard(config))


def _on_stall(config: Any) -> Any:
    """``[run] on_stall`` and its grace, else None (``"alert"``: the alert alone)."""
    if config.run.on_stall == "alert":
        return None
    from ..control.on_stall import OnStallConfig

    return OnStallConfig(config.run.on_stall, config.run.on_stall_grace_s, _guard(config))


def _refuse_unreadable_kinds(logs: tuple[str, ...] | list[str]) -> None:
    """A log named that is a directory, a FIFO or a device is refused at
    start (one line, exit 2), as ``replay`` and ``check`` refuse it: the
    tailer follows regular files only, and said "not a regular file" once
    while the watcher, given nothing else, ran on watching nothing."""
    import os
    import stat

    from ..sources.wakeups import is_glob

    for name in logs:
        path = os.path.expanduser(name)
        if is_glob(path):
            continue
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # not there yet: followed once it appears
        if stat.S_ISDIR(mode):
            raise SettingsError(f"{name}: a directory, not a log file (for the logs in it: '{name.rstrip('/')}/*.log')")
        if not stat.S_ISREG(mode):
            raise SettingsError(f"{name}: not a regular file (a FIFO or a device); log to a file and give its path")


def build_live(args: argparse.Namespace, *, keep_lines: int = 2000, keep_charts: bool = True) -> LiveSetup:
    """Settings -> Monitor -> (optional) Job -> LiveSession; raises ``common.ClearError``.

    ``keep_lines``, ``keep_charts``: what only a view reads (the log view's
    lines, the charts' series); headless keeps neither."""
    settings = load_run_settings(args)
    config = settings.config
    _refuse_unreadable_kinds(config.logs)

    from ..live import LiveSession
    from ..monitor import GPU_SAMPLING_OFF, Monitor

    monitor = Monitor(
        **monitor_kwargs(settings),
        keep_lines=keep_lines,
        keep_charts=keep_charts,
    )
    job, control_note = build_job(args, config, monitor)
    samples = config.gpu.samples_file
    if not config.gpu.enabled and not samples:
        monitor.gpu_unavailable = GPU_SAMPLING_OFF
    session = LiveSession(
        monitor,
        logs=config.logs,
        samples_file=samples,
        # Only --probe files are "given": the default globs beside the logs
        # may never match, and waiting for them is not worth a notice.
        probes=probe_patterns(settings) if settings.probes else None,
        use_nvml=config.gpu.enabled,
        gpu_interval_s=config.gpu.interval_s,
        gpu_indices=config.gpu.indices,
        record_file=config.gpu.record_file,
        job=job,
        auto_relaunch=_auto_relaunch(config),
        on_stall=_on_stall(config),
        alerts_file=config.alerts_file,
    )
    from .live_metrics import start_metrics
    from .live_sinks import start_sinks

    # The alert history: written first, closed first (its own thread), and
    # the gate that keeps a restart from sending what it already holds.
    history = getattr(session, "_history", None)
    live = LiveSetup(settings, monitor, session, job, control_note, [history] if history else [])
    sinks = start_sinks(settings, monitor.note, live.subscribe_output)
    try:
        metrics = start_metrics(args, settings, monitor, session, sinks=sinks)
    except Exception:
        # A port in use is exit 2; the dispatcher already started must not linger.
        if sinks:
            sinks.close(1.0)
        raise
    live.outputs.extend(o for o in (sinks, metrics) if o)
    if job is not None:
        from ..baseline.auto import AutoBaseline
        from ..baseline.saver import AutoBaselineSaver
        from ..control.spec import default_state_dir
        from ..sources.job_env import JobEnvironment

        live.outputs.append(JobEnvironment(monitor, job).start())
        policy = AutoBaseline.for_session(config.run.state_dir or default_state_dir(), job.spec.session)
        live.outputs.append(AutoBaselineSaver(monitor, policy).start())
    return live
