"""`dflash-watch replay LOG... [--gpu-samples F] [--probe F] [--baseline F] [--json]`.

`--json` prints alert lines (CONTRACTS section 2). Without it, on a
terminal, the finished run opens in the dashboard (alerts, GPU and
throughput history, the logs' last lines); piped, it prints a text report.
Probe lines (``--probe``, else ``dflash-probe-*.jsonl`` beside the logs)
are merged in time order with the logs and GPU samples.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from . import fail
from .common import ClearError, RunSettings, load_run_settings, monitor_kwargs, probe_files

if TYPE_CHECKING:
    from dflash_watch.detectors.base import Alert

    from ..monitor import Monitor


def run(args: argparse.Namespace) -> int:
    from ..monitor import Monitor
    from ..replay import ReplayInputError, check_inputs, replay

    try:
        settings = load_run_settings(args)

        probes = probe_files(settings, args.logs)
        check_inputs([*args.logs, *args.gpu_samples, *probes])
        monitor = Monitor(
            **monitor_kwargs(settings),
            keep_lines=0,
            keep_history=not args.json,
        )
        out = sys.stdout
        interactive = not args.json and out.isatty() and not getattr(args, "report", False)
        if interactive:
            def emit(alert: Alert) -> None:  # the dashboard shows them
                pass
        elif args.json:
            def emit(alert: Alert) -> None:
                out.write(alert.to_json() + "\n")
        else:
            from ..report import format_alert

            def emit(alert: Alert) -> None:
                out.write(format_alert(alert, tz=settings.tz) + "\n")

        result = replay(
            args.logs,
            gpu_samples=args.gpu_samples,
            probes=probes,
            monitor=monitor,
            tz=settings.tz,
            progress_pattern=settings.progress_pattern,
            on_alert=emit,
            parse_ahead=True,  # no thread of ours runs yet: large logs parse in a child
        )
    except (*ClearError, ReplayInputError) as exc:
        return fail(str(exc))
    for notice in result.notices:
        sys.stderr.write(f"dflash-watch: {notice}\n")
    if interactive:
        return _dashboard(result.monitor, args.logs, settings)
    if not args.json:
        from ..report import format_summary

        out.write(format_summary(result.monitor, tz=settings.tz) + "\n")
    out.flush()
    return 0


def _dashboard(monitor: Monitor, logs: list[str], settings: RunSettings) -> int:
    """The finished run in the dashboard: no job, no sources, just the view."""
    from ..sources.logtail import Chunk, read_chunks
    from ..tui.app import DashboardApp

    monitor.keep_lines = 2000
    for path in logs:
        tail: list[Chunk] = []
        for item in read_chunks(path):
            if isinstance(item, Chunk):
                tail = (tail + [item])[-2:]
        for chunk in tail:
            lines = chunk.text.split("\n")[:-1]
            monitor.remember_lines(path, lines, chunk.first_lineno)
    app = DashboardApp(
        monitor,
        control_note="replay of a finished run: no job to control",
        tz=settings.tz,
        clock=lambda: monitor.now or 0.0,
        keymap=settings.config.keys,
    )
    app.run()
    return app.return_code or 0  # (1: an error ended the app)
