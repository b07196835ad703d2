"""Prometheus metrics of a live session (CONTRACTS section 10).

One ``CollectorRegistry`` per session (never the process-global one), with
one collector that reads the Monitor under its lock when Prometheus
scrapes: nothing is computed per log line or per GPU sample. Two ways out:
``/metrics`` over HTTP (``--metrics-port``) and a node_exporter textfile
(``--metrics-file``) replaced atomically every few seconds.
"""

from __future__ import annotations

from .collector import AlertCounter, MonitorCollector, build_registry
from .exporter import HttpExporter, TextfileExporter

__all__ = ["AlertCounter", "HttpExporter", "MonitorCollector", "TextfileExporter", "build_registry"]
