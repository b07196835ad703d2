"""`dflash-watch watch`: the dashboard beside a live run.

Wiring only: settings -> Monitor -> (optional) Job -> LiveSession threads
-> the Textual app. Quitting stops the watcher's threads and nothing else:
the job lives in tmux and keeps running.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


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
        keymap=config.keys,
    )
    _leave_on_signal(live)
    live.session.start()
    try:
        app.run()
    finally:
        live.session.stop()
        live.close()
    # Not 0 after all: an error that ended the app (Textual printed its
    # traceback) is exit 1, as a script around the watcher must see.
    return app.return_code or 0


# The most a SIGTERM or SIGHUP may keep the watcher alive: long enough to
# read what the logs hold and hand pending alerts to the history and the
# sinks, short enough that `kill` still means "gone now".
LEAVE_BOUND_S = 2.0


def _leave_on_signal(live: Any) -> None:
    """A kill (SIGTERM) or a closed terminal (SIGHUP) ends the watcher within
    ``LEAVE_BOUND_S``, whatever its event loop is doing (a stuck redraw must
    not leave an orphan drawing into a dead terminal).

    First it releases what is pending, as headless does: one last read of
    the logs, the Monitor's held alerts (a traceback that ended a log,
    crash copies held back to merge ranks) into the history file, and the
    sinks a short last chance. That runs on a thread of its own, with a
    timer that exits regardless when the bound is reached. Nothing needs
    undoing: the job lives in tmux and keeps running
    (tests/e2e/test_watch_tmux.py checks it lives on).
    """
    import os
    import signal
    import threading
    import time

    started = threading.Event()

    def release(code: int, deadline: float) -> None:
        # Most of the bound for reading the logs (the crash that ended them
        # matters most), the rest for the sinks; the history is written as
        # each alert fires, inside these steps.
        steps = (
            lambda: live.session.drain(timeout=0.6 * LEAVE_BOUND_S),
            live.monitor.finish,
            lambda: live.close(timeout=max(0.05, deadline - time.monotonic())),
        )
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - leaving must not fail; the bound still holds
                pass
        os._exit(code)

    def leave(signum: int, _frame: object) -> None:
        code = 128 + signum
        if started.is_set():
            os._exit(code)  # asked twice: at once
        started.set()
        timer = threading.Timer(LEAVE_BOUND_S, os._exit, args=(code,))
        timer.daemon = True
        timer.start()
        deadline = time.monotonic() + LEAVE_BOUND_S - 0.1
        threading.Thread(target=release, args=(code, deadline), name="leave", daemon=True).start()

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, leave)
