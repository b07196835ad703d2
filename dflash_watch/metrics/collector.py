"""What the Monitor knows, as Prometheus metric families, read at scrape time.

Why a custom collector and not Gauges set from the ingest path: a gauge
``set()`` per progress line or GPU sample would put work on the hot path
(DESIGN: the ingest loop stays cheap) for values that are read every 15 s
at most. Here a scrape takes the Monitor's lock once, copies the few
numbers it needs, lets go, and only then builds the text.

Names follow CONTRACTS section 10: prefix ``dflash_``, base units, no
hostname label (Prometheus adds ``instance``; a host label of ours would
only disagree with it). Labels hold only values we chose (detector names
of section 4, GPU indices, unit words), never text read from a log.

The training-health families (loss, ranks, GPU health, Xid) are built in
``health.py`` from the same locked snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from dflash_watch.detectors.base import DETECTORS, SEVERITIES, Alert
from dflash_watch.parsers.events import IT_S, SAMPLES_S, TOK_S

from .health import health_families, health_snapshot

if TYPE_CHECKING:
    from ..monitor import Monitor

# ``dflash_alerts_firing_severity``: the most severe alert firing per detector.
SEVERITY_LEVEL = {name: i + 1 for i, name in enumerate(SEVERITIES)}  # info 1, warning 2, critical 3

# The run's own rate units as label values that say the unit in words.
UNIT_LABEL = {TOK_S: "tokens_per_second", SAMPLES_S: "samples_per_second", IT_S: "iterations_per_second"}

# One unit per metric name (issue 18): ``dflash_throughput{unit}`` stays (a
# contract name) and each unit also gets a name of its own, base unit in
# the name. An iteration of a progress bar is an optimizer step.
UNIT_SUFFIX = {TOK_S: "tokens_per_second", SAMPLES_S: "samples_per_second", IT_S: "steps_per_second"}
UNIT_WORDS = {TOK_S: "tokens/s", SAMPLES_S: "samples/s", IT_S: "steps (iterations)/s"}


def unit_label(unit: str | None) -> str:
    """A rate unit as a label value (``it/s`` -> ``iterations_per_second``)."""
    unit = unit or TOK_S
    return UNIT_LABEL.get(unit, "".join(c if c.isalnum() else "_" for c in unit))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dflash-watch")
    except PackageNotFoundError:
        return "unknown"


class AlertCounter:
    """Alerts fired per (detector, severity) since the session started.

    A Monitor listener: called once per alert (rare), under the Monitor's
    lock, which the collector also holds while it reads the counts. Only
    ``firing`` alerts count: one per episode, as CONTRACTS section 2 sends them.
    """

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def __call__(self, alert: Alert) -> None:
        if alert.state == "firing":
            key = (alert.detector, alert.severity)
            self.counts[key] = self.counts.get(key, 0) + 1


class MonitorCollector(Collector):
    """The Monitor's picture of the run as metric families, built per scrape."""

    def __init__(self, monitor: Monitor, counter: AlertCounter,
                 dropped: Callable[[], dict[str, int]] | None = None) -> None:
        self.monitor = monitor
        self.counter = counter
        # Per sink, alerts it will never deliver (``Dispatcher.dropped``).
        self.dropped = dropped
        self.version = _version()
        # One scrape at a time: an HTTP scrape and the textfile writer may
        # collect at the same moment from two threads.
        self._collecting = threading.Lock()

    def describe(self) -> list[Metric]:
        # Empty: the registry must not call ``collect`` at registration
        # (the Monitor may not have seen anything yet; names are fixed anyway).
        return []

    def collect(self) -> Iterator[Metric]:
        with self._collecting:
            snap = self._snapshot()
            snap["dropped"] = self.dropped() if self.dropped is not None else None
        yield from _families(snap, self.version)

    def _snapshot(self) -> dict[str, Any]:
        """The numbers a scrape needs, copied under the Monitor's lock."""
        m = self.monitor
        with m.lock:
            gpus = []
            for gpu in m.gpus.gpus:
                last = m.gpus.last(gpu)
                lost = m.gpus.lost(gpu)
                gone = lost is not None and (last is None or lost.time >= last.time)
                used = None if gone or last is None else last.used_bytes
                gpus.append((gpu, used, m.gpus.total_bytes(gpu)))
            progress = m.last_progress
            rate, unit = m.throughput.last_value, m.throughput_unit
            if rate is None and progress is not None:  # no history kept (keep_history off)
                if progress.rate is not None:
                    rate, unit = progress.rate, progress.rate_unit or TOK_S
                elif progress.tokens_per_s is not None:
                    rate, unit = progress.tokens_per_s, TOK_S
            firing: dict[str, int] = {}
            for alert in m.alerts.firing():
                level = SEVERITY_LEVEL.get(alert.severity, 1)
                firing[alert.detector] = max(firing.get(alert.detector, 0), level)
            job = m.job_state
            return {
                "gpus": gpus,
                "rate": rate,
                "unit": unit,
                "baseline": _baseline(m),
                "step": progress.step if progress is not None else None,
                "progress_time": progress.time if progress is not None else None,
                "padding": getattr(m, "padding_efficiency", None),
                "firing": firing,
                "counts": dict(self.counter.counts),
                "job_up": None if job is None else (1.0 if job.running else 0.0),
                "restarts": m.restarts,
                "health": health_snapshot(m),
            }


def _baseline(m: Any) -> tuple[float, str] | None:
    """(reference rate, its unit): the baseline file's, else the one the run taught."""
    if m.baseline is not None and m.baseline.throughput_tokens_per_s:
        return float(m.baseline.throughput_tokens_per_s), m.baseline.unit
    detector = m.detectors.get("throughput_drop")
    learned = getattr(detector, "learned_rate", None)
    if learned is None:
        return None
    value, unit = learned()
    return (float(value), unit) if value else None


def _families(s: dict[str, Any], version: str) -> Iterator[Metric]:
    used = GaugeMetricFamily("dflash_gpu_memory_used_bytes", "GPU memory in use, latest sample", labels=["gpu"])
    total = GaugeMetricFamily("dflash_gpu_memory_total_bytes", "GPU memory size", labels=["gpu"])
    for gpu, used_bytes, total_bytes in s["gpus"]:
        if used_bytes is not None:
            used.add_metric([str(gpu)], float(used_bytes))
        if total_bytes is not None:
            total.add_metric([str(gpu)], float(total_bytes))
    yield used
    yield total

    rate, unit = s["rate"], s["unit"]
    if rate is not None:
        yield _rate("dflash_throughput", "Training rate in the run's own unit (label unit)", rate, unit)
        if unit in UNIT_SUFFIX:
            yield GaugeMetricFamily(f"dflash_throughput_{UNIT_SUFFIX[unit]}",
                                    f"Training throughput, {UNIT_WORDS[unit]}", value=rate)
    if s["baseline"] is not None:
        ref, ref_unit = s["baseline"]
        yield _rate("dflash_throughput_baseline", "Reference rate of a good run (label unit)", ref, ref_unit)
        if ref_unit in UNIT_SUFFIX:
            yield GaugeMetricFamily(f"dflash_throughput_baseline_{UNIT_SUFFIX[ref_unit]}",
                                    f"Reference throughput of a good run, {UNIT_WORDS[ref_unit]}", value=ref)
    if s["step"] is not None:
        yield GaugeMetricFamily("dflash_step", "Latest training step seen", value=float(s["step"]))
    if s["padding"] is not None:
        yield GaugeMetricFamily("dflash_padding_efficiency_ratio", "Real tokens / padded tokens (0..1)",
                                value=float(s["padding"]))
    if s["progress_time"] is not None:
        yield GaugeMetricFamily("dflash_last_progress_timestamp_seconds",
                                "Time of the latest progress line, seconds since the epoch (log clock)",
                                value=float(s["progress_time"]))

    firing = GaugeMetricFamily("dflash_alerts_firing", "1 while the detector has an alert firing",
                               labels=["detector"])
    level = GaugeMetricFamily("dflash_alerts_firing_severity",
                              "Most severe alert firing: 0 none, 1 info, 2 warning, 3 critical",
                              labels=["detector"])
    for name in (*DETECTORS, *sorted(set(s["firing"]) - set(DETECTORS))):
        lvl = s["firing"].get(name, 0)
        firing.add_metric([name], 1.0 if lvl else 0.0)
        level.add_metric([name], float(lvl))
    yield firing
    yield level

    counts = s["counts"]
    fired = CounterMetricFamily("dflash_alerts", "Alerts fired since the watcher started",
                                labels=["detector", "severity"])
    for name in DETECTORS:
        for severity in SEVERITIES:
            fired.add_metric([name, severity], float(counts.get((name, severity), 0)))
    for (name, severity), n in counts.items():  # a name added to the core later still shows
        if name not in DETECTORS or severity not in SEVERITIES:
            fired.add_metric([name, severity], float(n))
    yield fired

    if s.get("dropped") is not None:
        # Sink names come from the config (``name``, else ``kind[i]``), never from a log.
        dropped = CounterMetricFamily("dflash_alerts_dropped", "Alerts a sink accepted and will never deliver "
                                      "(failed, queue full, rate limit, unsent, or pending at exit)",
                                      labels=["sink"])
        for name, n in sorted(s["dropped"].items()):
            dropped.add_metric([name], float(n))
        yield dropped

    if s["job_up"] is not None:
        yield GaugeMetricFamily("dflash_job_up", "1 while the managed training job runs", value=s["job_up"])
    yield CounterMetricFamily("dflash_job_restarts", "Relaunches of the training job seen",
                              value=float(s["restarts"]))
    yield from health_families(s["health"])
    # Last on purpose: a textfile cut short lacks it (tests/shell/test_metrics_textfile.py).
    info = GaugeMetricFamily("dflash_build_info", "dflash-watch version", labels=["version"])
    info.add_metric([version], 1.0)
    yield info


def _rate(name: str, doc: str, value: float, unit: str | None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["unit"])
    family.add_metric([unit_label(unit)], float(value))
    return family


def build_registry(monitor: Monitor, sinks: Any = None) -> CollectorRegistry:
    """A registry of our own (never the global one) with the Monitor's collector,
    its alert counter subscribed to the Monitor; ``sinks``: the session's
    dispatcher, whose drops are ``dflash_alerts_dropped_total{sink}``.

    It also carries prometheus-client's standard ``process_*`` (CPU seconds,
    resident memory, open fds of the watcher itself: is the babysitter
    healthy?) and ``python_*`` (interpreter info, GC) collectors, which every
    Python exporter has and dashboards expect; registered here, not on the
    process-global registry."""
    counter = AlertCounter()
    monitor.subscribe(counter)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor, counter, sinks.dropped if sinks is not None else None))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry
