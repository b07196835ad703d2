"""The two ways metrics leave a session: ``/metrics`` over HTTP, or a textfile.

Both are outputs of ``LiveSetup``: started before the session, closed after
it with ``close(timeout)``. Neither runs on the ingest threads; the HTTP
server answers scrapes on one thread of its own, the textfile writer wakes every
few seconds on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.exposition import write_to_textfile
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from .http_server import MetricsServer

# node_exporter's textfile collector reads its directory on every scrape
# (15 s is usual): a few seconds keeps the file fresh at no real cost.
TEXTFILE_INTERVAL_S = 5.0


class HttpExporter:
    """``/metrics`` on ``host:port`` for one registry (``http_server``: one thread,
    bounded connections, never a thread per idle client).

    Raises ``OSError`` (port in use, unknown address) from the constructor,
    so the command can say so in one line before anything else starts.
    Port 0 takes a free port; ``port`` is the one bound.
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._server = MetricsServer(registry, host, port)
        self.host = host
        self.port: int = self._server.server_address[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self, timeout: float = 5.0) -> None:
        self._server.close(timeout)


class _OwnFamilies(Collector):
    """The ``dflash_*`` families of a registry, without its ``process_*``/``python_*``.

    node_exporter serves a textfile's series beside its own ``process_*``
    series, which have the same names and labels: the textfile would make
    every node_exporter scrape report duplicates. The watcher's own process
    figures go out over ``--metrics-port`` only."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        return (m for m in self.registry.collect() if m.name.startswith("dflash_"))


def own_families(registry: CollectorRegistry) -> CollectorRegistry:
    out = CollectorRegistry(auto_describe=False)
    out.register(_OwnFamilies(registry))
    return out


class TextfileExporter:
    """Writes the registry to ``path`` every ``interval_s`` and once at close.

    Each write goes to a temporary file beside ``path`` and is renamed over
    it (prometheus-client's ``write_to_textfile``), so node_exporter never
    reads half a file. The first write happens in the constructor: a path
    that cannot be written is an ``OSError`` for the command to report. A
    later failure (disk full) is one notice, and one more when it recovers.
    """

    def __init__(self, registry: CollectorRegistry, path: str, *, interval_s: float = TEXTFILE_INTERVAL_S,
                 note: Callable[[str], None] | None = None) -> None:
        self.registry = own_families(registry)
        self.path = path
        self.interval_s = interval_s
        self._note = note or (lambda _message: None)
        self._failing = False
        self.writes = 0
        write_to_textfile(path, self.registry)
        self.writes += 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dflash-metrics-textfile", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.write()

    def write(self) -> None:
        try:
            write_to_textfile(self.path, self.registry)
        except OSError as exc:
            if not self._failing:
                self._failing = True
                self._note(f"metrics file {self.path}: cannot write ({exc.strerror or exc}); retrying")
            return
        self.writes += 1
        if self._failing:
            self._failing = False
            self._note(f"metrics file {self.path}: written again")

    def close(self, timeout: float = 5.0) -> None:
        """Stop the timer and write the final values (what the run ended with)."""
        self._stop.set()
        self._thread.join(timeout)
        self.write()


class Exporters:
    """The exporters of one session, closed together (``LiveSetup`` takes one output)."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts

    def close(self, timeout: float = 5.0) -> None:
        errors = []
        for part in self.parts:
            try:
                part.close(timeout)
            except Exception as exc:  # noqa: BLE001 - close the others first
                errors.append(exc)
        if errors:
            raise errors[0]
