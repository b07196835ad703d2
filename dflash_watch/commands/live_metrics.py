"""Prometheus metrics of a live session (`--metrics-port`, `--metrics-file`).

Built once in ``live_setup.build_live``; returns an exporter with
``close(timeout)``, or None when neither flag is given.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import SettingsError


def start_metrics(args: argparse.Namespace, settings: Any, monitor: Any, session: Any) -> Any | None:
    if getattr(args, "metrics_port", None) is not None or getattr(args, "metrics_file", None):
        raise SettingsError("--metrics-port/--metrics-file: Prometheus metrics are not in this version yet")
    return None
