"""`dflash-watch headless`: the live session of `watch` without a screen.

A daemon per node (CONTRACTS section 1): every alert is one JSON line
(section 2) on stdout the moment it fires or resolves, flushed per line, so
a pipe, `jq`, a log shipper or systemd's journal sees it at once; notices
(a file rotated, GPUs not found) go to stderr. SIGTERM and SIGINT emit what
is still pending (a traceback that ended the log, crash copies held back
to be merged across ranks) and exit 0. Like the dashboard it never touches
the job: stopping it leaves the training running.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..monitor import Monitor


class _Printer:
    """Writes alerts and notices as they come, from any thread, one line each."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self._lock = threading.Lock()
        self._notices_seen = 0
        self.broken = False

    def alert(self, alert: Any) -> None:
        line = alert.to_json() + "\n"
        with self._lock:
            if self.broken:
                return
            try:
                self.out.write(line)
                self.out.flush()
            except (BrokenPipeError, ValueError):
                # The reader left (`headless | head`): nobody is listening
                # any more, so stop as after SIGTERM.
                self.broken = True

    def notices(self, monitor: Monitor) -> None:
        """New notices of the Monitor since the last call, to stderr."""
        with monitor.lock:
            total = monitor.notices_total
            new = min(total - self._notices_seen, len(monitor.notices))
            fresh = list(monitor.notices)[-new:] if new > 0 else []
            self._notices_seen = total
        for message in fresh:
            with self._lock:
                try:
                    self.err.write(f"dflash-watch: {message}\n")
                    self.err.flush()
                except (BrokenPipeError, ValueError):
                    pass


def _nothing_to_watch(args: argparse.Namespace, live: Any) -> bool:
    """No log, no config, no sample or probe file, no job: a daemon that
    would wait forever for nothing (a typo'd unit file, a missing flag).
    Recording or exporting NVML samples alone is a use of its own."""
    config = live.settings.config
    return not (config.path or config.logs or config.gpu.samples_file or config.gpu.record_file
                or live.job is not None or live.control_note or live.settings.probes
                or getattr(args, "metrics_port", None) or getattr(args, "metrics_file", None))


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from .common import ClearError
    from .live_setup import build_live

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        live = build_live(args, keep_lines=0, keep_charts=False)
    except ClearError as exc:
        print(f"dflash-watch: {exc}", file=err)
        return 2
    if _nothing_to_watch(args, live):
        live.close(1.0)
        print("dflash-watch: nothing to watch: pass --log PATH (or --config F with logs, --gpu-samples F, "
              "--session NAME)", file=err)
        return 2
    monitor, session = live.monitor, live.session
    printer = _Printer(out, err)
    live.subscribe_output(printer.alert)
    if live.control_note:
        monitor.note(live.control_note)

    stop = threading.Event()

    def leave(signum: int, _frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, leave) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    session.start()
    try:
        while not stop.wait(0.2) and not printer.broken:
            printer.notices(monitor)
    finally:
        # What is pending: lines written but not read yet, the traceback
        # that ended a log, crash copies held back to merge ranks. A failure
        # here is said on stderr; the watcher still leaves as asked (exit 0).
        for step in (lambda: session.drain(timeout=2.0), session.stop, monitor.finish, live.close):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - leaving must not fail
                monitor.note(f"while stopping: {type(exc).__name__}: {exc}")
        printer.notices(monitor)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
