"""Prometheus metrics of a live session (`--metrics-port`, `--metrics-file`).

Built once in ``live_setup.build_live``; returns an exporter with
``close(timeout)``, or None when neither flag is given. A port that is
taken or an address that cannot be bound is a ``SettingsError`` (one line,
exit 2) before the session starts, not a traceback from a server thread.
prometheus-client is imported only here, when a flag asks for it.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from .common import SettingsError

if TYPE_CHECKING:
    from ..monitor import Monitor

DEFAULT_HOST = "127.0.0.1"


def start_metrics(args: argparse.Namespace, settings: Any, monitor: Monitor, session: Any,
                  sinks: Any = None) -> Any | None:
    port = getattr(args, "metrics_port", None)
    host = getattr(args, "metrics_host", None)
    path = getattr(args, "metrics_file", None)
    if host and port is None:
        raise SettingsError(f"--metrics-host {host}: needs --metrics-port N (the address to serve /metrics on)")
    if port is None and not path:
        return None
    if port is not None and not 0 <= port <= 65535:
        raise SettingsError(f"--metrics-port {port}: not a port number (0..65535)")
    host = host or DEFAULT_HOST

    from ..metrics.collector import build_registry
    from ..metrics.exporter import Exporters, HttpExporter, TextfileExporter

    registry = build_registry(monitor, sinks)
    parts: list[Any] = []
    if port is not None:
        try:
            http = HttpExporter(registry, host, port)
        except (OSError, OverflowError, UnicodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise SettingsError(f"--metrics-port {port}: cannot listen on {host}:{port}: {reason}") from None
        parts.append(http)
        monitor.note(f"metrics on {http.url}")
    if path:
        path = os.path.abspath(os.path.expanduser(path))
        if not path.endswith(".prom"):
            monitor.note(f"metrics file {path}: node_exporter's textfile collector reads only *.prom files")
        try:
            parts.append(TextfileExporter(registry, path, note=monitor.note))
        except OSError as exc:
            for part in parts:
                part.close(1.0)
            raise SettingsError(f"--metrics-file {path}: cannot write: {exc.strerror or exc}") from None
    return Exporters(parts)
