"""`dflash-watch replay LOG... [--gpu-samples F] [--baseline F] [--json]`."""

from __future__ import annotations

import argparse
import sys

from . import fail
from .common import ClearError, load_run_settings


def run(args: argparse.Namespace) -> int:
    from ..monitor import Monitor
    from ..replay import ReplayInputError, check_inputs, replay

    try:
        settings = load_run_settings(args)

        check_inputs([*args.logs, *args.gpu_samples])
        monitor = Monitor(
            detector_config=settings.detector_config,
            baseline=settings.baseline,
            tz=settings.tz,
            progress_pattern=settings.progress_pattern,
            keep_lines=0,
        )
        out = sys.stdout
        if args.json:
            def emit(alert):  # noqa: ANN001 - Alert
                out.write(alert.to_json() + "\n")
        else:
            from ..report import format_alert

            def emit(alert):  # noqa: ANN001
                out.write(format_alert(alert, tz=settings.tz) + "\n")

        result = replay(
            args.logs,
            gpu_samples=args.gpu_samples,
            monitor=monitor,
            tz=settings.tz,
            progress_pattern=settings.progress_pattern,
            on_alert=emit,
        )
    except (*ClearError, ReplayInputError) as exc:
        return fail(str(exc))
    for notice in result.notices:
        sys.stderr.write(f"dflash-watch: {notice}\n")
    if not args.json:
        from ..report import format_summary

        out.write(format_summary(result.monitor, tz=settings.tz) + "\n")
    out.flush()
    return 0
