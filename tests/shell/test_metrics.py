"""The Prometheus exporter as Prometheus meets it: a real HTTP server on
127.0.0.1, scraped with urllib and read with prometheus-client's own parser.

A Monitor is fed known events (GPU samples, progress lines, a traceback);
each value on /metrics must be the one those events imply.
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from datetime import datetime

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dflash_watch.control.state import JobState
from dflash_watch.detectors.base import DETECTORS, SEVERITIES
from dflash_watch.metrics.collector import build_registry
from dflash_watch.metrics.exporter import HttpExporter
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuSample

GIB = 1 << 30
T0 = datetime(2026, 11, 29, 10, 0, 0).timestamp()  # naive log times are local time
STEP = "2026-11-29 10:00:{s:02d},000 - INFO - dflash.train - step {n}/1000 | loss 2.31 | {rate} Ktok/s\n"
IT_STEP = " {p}%|#    | {n}/1000 [00:{s:02d}<04:45,  3.25it/s]\n"  # tqdm: it/s only
TRACEBACK = (
    "[rank3]: Traceback (most recent call last):\n"
    '[rank3]:   File "/opt/dflash/train.py", line 412, in <module>\n'
    "[rank3]:     main()\n"
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
)


def _scrape(exporter: HttpExporter) -> dict[tuple[str, tuple], float]:
    """``{(sample name, sorted labels): value}`` of one real scrape."""
    with urllib.request.urlopen(exporter.url, timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture(scope="module")
def _started():
    """The exporters of this module, closed together at its end (each close
    waits out the server's 0.5 s poll; in parallel that is paid once)."""
    started: list[HttpExporter] = []
    yield started
    closers = [threading.Thread(target=e.close, args=(2.0,)) for e in started]
    for t in closers:
        t.start()
    for t in closers:
        t.join()


@pytest.fixture
def serve(_started):
    def serve(monitor: Monitor) -> HttpExporter:
        exporter = HttpExporter(build_registry(monitor), "127.0.0.1", 0)
        _started.append(exporter)
        return exporter

    return serve


def _fed_monitor(cls: type[Monitor] = Monitor) -> Monitor:
    m = cls()
    m.feed_samples([GpuSample(T0 + i, gpu, (40 + gpu + i) * GIB, 80 * GIB) for i in range(3) for gpu in (0, 5)])
    text = "".join(STEP.format(s=i, n=100 + i, rate=20 + i / 2) for i in range(6))
    m.feed_text("/runs/a/train.log", text, 1, T0 + 6)
    return m


def test_values_follow_the_events_the_monitor_was_fed(serve) -> None:
    m = _fed_monitor()
    exporter = serve(m)
    got = _scrape(exporter)
    assert got[("dflash_gpu_memory_used_bytes", (("gpu", "0"),))] == 42 * GIB  # the latest sample
    assert got[("dflash_gpu_memory_used_bytes", (("gpu", "5"),))] == 47 * GIB
    assert got[("dflash_gpu_memory_total_bytes", (("gpu", "5"),))] == 80 * GIB
    assert got[("dflash_step", ())] == 105
    assert got[("dflash_throughput_tokens_per_second", ())] == 22500.0
    assert got[("dflash_throughput", (("unit", "tokens_per_second"),))] == 22500.0
    assert got[("dflash_last_progress_timestamp_seconds", ())] == pytest.approx(T0 + 5)
    assert got[("dflash_build_info", (("version", prometheus_client_version_of_us()),))] == 1
    for name in DETECTORS:  # every detector present, none firing: rules can rely on the series
        assert got[("dflash_alerts_firing", (("detector", name),))] == 0
        for severity in SEVERITIES:
            assert got[("dflash_alerts_total", (("detector", name), ("severity", severity)))] == 0
    assert ("dflash_job_up", ()) not in got  # no job control, no claim about a job
    assert not any(name == "dflash_padding_efficiency_ratio" for name, _ in got)

    # A crash: firing (critical) now, counted once; the scrape after shows it.
    m.feed_text("/runs/a/train.log", TRACEBACK, 7, T0 + 7)
    m.quiet(T0 + 9, T0 + 7)
    assert [a.detector for a in m.alerts.firing()] == ["crash"]
    got = _scrape(exporter)
    assert got[("dflash_alerts_firing", (("detector", "crash"),))] == 1
    assert got[("dflash_alerts_firing_severity", (("detector", "crash"),))] == 3
    assert got[("dflash_alerts_firing", (("detector", "stall"),))] == 0
    assert got[("dflash_alerts_total", (("detector", "crash"), ("severity", "critical")))] == 1
    assert got[("dflash_alerts_total", (("detector", "crash"), ("severity", "warning")))] == 0


def prometheus_client_version_of_us() -> str:
    from importlib.metadata import version

    return version("dflash-watch")


def test_the_job_the_padding_and_the_baseline_when_known(serve) -> None:
    class WithPadding(Monitor):
        @property
        def padding_efficiency(self) -> float | None:
            return 0.41

    m = _fed_monitor(WithPadding)
    from dflash_watch.baseline.store import Baseline

    m.set_baseline(Baseline(21500.0))
    m.set_job_state(JobState("running", "train", pid=123))
    exporter = serve(m)
    got = _scrape(exporter)
    assert got[("dflash_padding_efficiency_ratio", ())] == 0.41
    assert got[("dflash_throughput_baseline_tokens_per_second", ())] == 21500.0
    assert got[("dflash_throughput_baseline", (("unit", "tokens_per_second"),))] == 21500.0
    assert got[("dflash_job_up", ())] == 1
    assert got[("dflash_job_restarts_total", ())] == 0
    m.set_job_state(JobState("exited", "train", code=1))
    m.job_relaunched(T0 + 20)
    got = _scrape(exporter)
    assert got[("dflash_job_up", ())] == 0
    assert got[("dflash_job_restarts_total", ())] == 1


def test_a_run_that_prints_only_its_per_second_has_no_tokens_metric(serve) -> None:
    m = Monitor()
    m.feed_text("/runs/hf/train.log", "".join(IT_STEP.format(p=i, s=i, n=i + 1) for i in range(4)), 1, T0 + 4)
    got = _scrape(serve(m))
    assert got[("dflash_throughput", (("unit", "iterations_per_second"),))] == 3.25
    assert ("dflash_throughput_tokens_per_second", ()) not in got


def test_names_carry_base_units_and_no_hostname(serve) -> None:
    m = _fed_monitor()
    m.feed_samples([GpuSample(T0 + 9, 0, 40 * GIB, 80 * GIB, temp_c=70.0, power_w=500.0, power_limit_w=700.0,
                              sm_clock_mhz=1400.0, sm_clock_max_mhz=1980.0, throttle=(), ecc_uncorrected=0)])
    exporter = serve(m)
    with urllib.request.urlopen(exporter.url, timeout=5) as r:
        text = r.read().decode()
    families = list(text_string_to_metric_families(text))
    # Ours carry the prefix; beside them only prometheus-client's standard
    # process_* and python_* collectors (the watcher's own health).
    assert families and all(f.name.startswith(("dflash_", "process_", "python_")) for f in families)
    assert {f.name for f in families if f.name.startswith("process_")} >= {"process_cpu_seconds"}
    families = [f for f in families if f.name.startswith("dflash_")]
    allowed = {"gpu", "detector", "severity", "unit", "version", "rank", "reason", "code"}
    for f in families:
        if f.type == "counter":
            assert all(s.name == f.name + "_total" for s in f.samples if not s.name.endswith("_created")), f.name
        if "memory" in f.name:
            assert f.name.endswith("_bytes"), f.name
        if "timestamp" in f.name:
            assert f.name.endswith("_seconds"), f.name
        if "efficiency" in f.name:
            assert f.name.endswith("_ratio"), f.name
        if "temperature" in f.name:
            assert f.name.endswith("_celsius"), f.name
        if "power" in f.name:
            assert f.name.endswith("_watts"), f.name
        if "clock" in f.name:
            assert f.name.endswith(("_hertz", "_ratio")), f.name
        for s in f.samples:
            assert set(s.labels) <= allowed, (s.name, s.labels)
    assert socket.gethostname() not in text
    # Our registry only: the process-global one carries none of it.
    assert b"dflash_" not in prometheus_client.generate_latest(prometheus_client.REGISTRY)


def test_an_episode_that_resolves_is_counted_once_and_stops_firing(serve) -> None:
    """A stall (warning): firing after an hour of silence, resolved when steps come back."""
    m = Monitor()
    line = "2026-11-29 {h:02d}:{m:02d}:{s:02d},000 - INFO - dflash.train - step {n}/1000 | loss 2.3 | 21.5 Ktok/s\n"
    for i in range(60):
        m.feed_text("train.log", line.format(h=10, m=0, s=i, n=i + 1), i + 1, T0 + i)
    exporter = serve(m)
    stalled = m.tick(T0 + 3600)
    assert [(a.detector, a.state) for a in stalled] == [("stall", "firing")]
    got = _scrape(exporter)
    assert got[("dflash_alerts_firing", (("detector", "stall"),))] == 1
    assert got[("dflash_alerts_firing_severity", (("detector", "stall"),))] == SEVERITIES.index(stalled[0].severity) + 1
    for i in range(3):
        m.feed_text("train.log", line.format(h=11, m=0, s=i, n=61 + i), 61 + i, T0 + 3600 + i)
    assert [a.state for a in m.alerts.history] == ["firing", "resolved"]
    got = _scrape(exporter)
    assert got[("dflash_alerts_firing", (("detector", "stall"),))] == 0
    assert got[("dflash_alerts_firing_severity", (("detector", "stall"),))] == 0
    assert got[("dflash_alerts_total", (("detector", "stall"), ("severity", stalled[0].severity)))] == 1
    assert got[("dflash_last_progress_timestamp_seconds", ())] == pytest.approx(T0 + 3602)
