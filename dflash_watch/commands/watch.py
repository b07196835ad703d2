"""`dflash-watch watch`: the dashboard beside a live run.

Wiring only: settings -> Monitor -> (optional) Job -> LiveSession threads
-> the Textual app. Quitting stops the watcher's threads and nothing else:
the job lives in tmux and keeps running.
"""

from __future__ import annotations

import argparse
import sys

def _fail(message: str) -> int:
    print(f"dflash-watch: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from .common import ClearError
    from .live_setup import build_live

    try:
        live = build_live(args)
    except ClearError as exc:
        return _fail(str(exc))
    config = live.settings.config

    from ..tui.app import DashboardApp

    app = DashboardApp(
        live.monitor,
        job=live.job,
        control_note=live.control_note,
        session=live.session,
        baseline_path=config.baseline_file,
        tz=live.settings.tz,
        logs_configured=bool(config.logs),
    )
    _leave_on_hangup()
    live.session.start()
    try:
        app.run()
    finally:
        live.session.stop()
        live.close()
    return 0


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
