"""Issue 19's metrics (the loss, the ranks, the GPU itself) as Prometheus reads them.

A Monitor is fed known events, its registry is rendered with
prometheus-client's own ``generate_latest`` and read back with its own
parser: each value must be the one the events imply, a NaN loss must
arrive as NaN, and a part the core cannot answer is absent, never a zero.
The ranks and the Xid counts come from the straggler and gpu_health
detectors' accessors; where those are not in the tree yet, a stand-in
object with the agreed fields answers for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import prometheus_client
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dflash_watch.baseline.store import Baseline
from dflash_watch.detectors.registry import DetectorSet
from dflash_watch.metrics.collector import build_registry
from dflash_watch.metrics.health import THROTTLE_REASONS
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuLost, GpuSample, ProbeSample

GIB = 1 << 30
T0 = datetime(2026, 11, 29, 10, 0, 0).timestamp()  # naive log times are local time
STEP = "2026-11-29 10:00:{s:02d},000 - INFO - dflash.train - step {n}/1000 | loss {loss} | grad_norm {g} | 21.5 Ktok/s\n"


def _scrape(m: Monitor) -> tuple[dict[tuple[str, tuple], float], dict[str, str]]:
    """``({(sample name, sorted labels): value}, {family name: type})`` of one rendering."""
    text = generate_latest(build_registry(m)).decode()
    values, types = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values, types


def _names(values: dict[tuple[str, tuple], float]) -> set[str]:
    return {name for name, _ in values}


def _healthy(t: float, gpu: int, **over: Any) -> GpuSample:
    fields: dict[str, Any] = dict(
        temp_c=71.0, power_w=612.5, power_limit_w=700.0, sm_clock_mhz=1485.0, sm_clock_max_mhz=1980.0,
        throttle=("power_cap",), ecc_uncorrected=0, remap_pending=False, retired_pages=2,
        pcie_gen=5, pcie_gen_max=5, pcie_width=16, pcie_width_max=16,
    )
    fields.update(over)
    return GpuSample(t, gpu, 40 * GIB, 80 * GIB, **fields)


def test_gpu_health_fields_of_the_latest_sample_in_base_units() -> None:
    m = Monitor()
    m.feed_samples([_healthy(T0, 0, temp_c=60.0), _healthy(T0 + 1, 0, throttle=("thermal", "sw_thermal"),
                                                           ecc_uncorrected=3, remap_pending=True, pcie_gen=3,
                                                           pcie_width=8),
                    _healthy(T0 + 1, 1)])
    got, types = _scrape(m)
    g0, g1 = (("gpu", "0"),), (("gpu", "1"),)
    assert got[("dflash_gpu_temperature_celsius", g0)] == 71.0  # the latest sample, not the first
    assert got[("dflash_gpu_power_watts", g0)] == 612.5
    assert got[("dflash_gpu_power_limit_watts", g0)] == 700.0
    assert got[("dflash_gpu_sm_clock_hertz", g0)] == 1485e6
    assert got[("dflash_gpu_sm_clock_max_hertz", g0)] == 1980e6
    assert got[("dflash_gpu_sm_clock_ratio", g0)] == pytest.approx(0.75)
    for reason in THROTTLE_REASONS:  # every reason 0/1, so a rule sees the flag drop back to 0
        want = 1.0 if reason in ("thermal", "sw_thermal") else 0.0
        assert got[("dflash_gpu_throttle", (("gpu", "0"), ("reason", reason)))] == want, reason
    assert got[("dflash_gpu_throttle", (("gpu", "1"), ("reason", "power_cap")))] == 1.0
    # The driver's volatile count: a counter (only rises, resets with the driver).
    assert types["dflash_gpu_ecc_uncorrected"] == "counter"
    assert got[("dflash_gpu_ecc_uncorrected_total", g0)] == 3
    assert got[("dflash_gpu_ecc_uncorrected_total", g1)] == 0
    assert got[("dflash_gpu_remap_pending", g0)] == 1
    assert got[("dflash_gpu_remap_pending", g1)] == 0
    assert got[("dflash_gpu_retired_pages", g0)] == 2
    assert (got[("dflash_gpu_pcie_link_gen", g0)], got[("dflash_gpu_pcie_link_gen_max", g0)]) == (3, 5)
    assert (got[("dflash_gpu_pcie_link_width", g0)], got[("dflash_gpu_pcie_link_width_max", g0)]) == (8, 16)
    assert got[("dflash_gpu_lost", g0)] == 0


def test_a_read_the_card_does_not_support_is_absent_and_a_lost_gpu_says_so() -> None:
    m = Monitor()
    m.feed_samples([GpuSample(T0, 0, 40 * GIB, 80 * GIB, temp_c=50.0, throttle=("bogus_reason",)),
                    _healthy(T0, 1), GpuLost(T0 + 2, 1, "GPU is lost")])
    got, _ = _scrape(m)
    assert got[("dflash_gpu_temperature_celsius", (("gpu", "0"),))] == 50.0
    for name in ("dflash_gpu_power_watts", "dflash_gpu_sm_clock_ratio", "dflash_gpu_ecc_uncorrected_total",
                 "dflash_gpu_pcie_link_gen", "dflash_gpu_remap_pending"):
        assert (name, (("gpu", "0"),)) not in got, name  # NotSupported: no sample, never a 0
    # A reason outside the contract's list is not turned into a label value.
    assert ("dflash_gpu_throttle", (("gpu", "0"), ("reason", "bogus_reason"))) not in got
    assert got[("dflash_gpu_throttle", (("gpu", "0"), ("reason", "thermal")))] == 0
    # GPU 1 fell off the bus after its last sample: lost, and its last reads are not its state.
    assert got[("dflash_gpu_lost", (("gpu", "1"),))] == 1
    assert ("dflash_gpu_temperature_celsius", (("gpu", "1"),)) not in got


def test_a_nan_loss_is_exported_as_nan_and_counted() -> None:
    m = Monitor()
    text = "".join(STEP.format(s=i, n=100 + i, loss=2.3 - i / 100, g=1.5) for i in range(6))
    m.feed_text("/runs/a/train.log", text, 1, T0 + 6)
    got, types = _scrape(m)
    assert got[("dflash_training_loss", ())] == pytest.approx(2.25)
    assert got[("dflash_grad_norm", ())] == 1.5
    assert got[("dflash_training_loss_timestamp_seconds", ())] == pytest.approx(T0 + 5)
    assert got[("dflash_loss_nan_total", ())] == 0  # there at 0 before the first NaN: increase() sees it
    assert types["dflash_loss_nan"] == "counter" and types["dflash_training_loss"] == "gauge"

    m.feed_text("/runs/a/train.log", STEP.format(s=7, n=107, loss="nan", g="inf"), 7, T0 + 8)
    got, _ = _scrape(m)
    assert math.isnan(got[("dflash_training_loss", ())])
    assert got[("dflash_grad_norm", ())] == math.inf
    assert got[("dflash_loss_nan_total", ())] == 1
    assert got[("dflash_alerts_firing", (("detector", "loss"),))] == 1
    assert got[("dflash_alerts_firing_severity", (("detector", "loss"),))] == 3
    assert b"dflash_training_loss NaN" in generate_latest(build_registry(m))


def test_loss_and_loss_scale_from_probe_lines() -> None:
    m = Monitor()
    m.feed_probes([ProbeSample(T0 + i, rank=0, step=i, loss=3.0 - i / 10, grad_norm=0.5, loss_scale=65536.0 / 2**i)
                   for i in range(3)])
    got, _ = _scrape(m)
    assert got[("dflash_training_loss", ())] == pytest.approx(2.8)
    assert got[("dflash_loss_scale", ())] == 16384.0
    assert got[("dflash_grad_norm", ())] == 0.5


@dataclass(frozen=True, slots=True)
class _Row:
    """The agreed fields of ``detectors.straggler.RankRow``."""

    rank: int
    gpu: int | None
    step_seconds: float | None
    compute_seconds: float | None
    wait_seconds: float | None
    last_step: int | None
    last_seen: float | None
    slow: bool = False
    hung: bool = False
    waiting_in: str | None = None


@dataclass(frozen=True, slots=True)
class _Gpu:
    """The agreed fields of ``detectors.gpu_health.GpuHealthState`` (+ per-code counts where given)."""

    xid_total: int = 0
    last_xid: int | None = None
    ecc_uncorrected: int | None = None
    throttle: tuple[str, ...] = ()
    xid_counts: dict[int, int] | None = field(default=None)


def test_per_rank_step_seconds_from_the_rank_table() -> None:
    m = Monitor()
    rows = [_Row(1, 1, 2.0, 1.0, 1.0, 500, T0 + 9), _Row(0, 0, 2.0, 0.9, 1.1, 500, T0 + 9),
            _Row(2, None, 2.0, 1.9, 0.1, 499, T0 + 8, slow=True), _Row(3, 3, None, None, None, 412, T0 - 600, hung=True)]
    m.detectors.rank_table = lambda: rows  # type: ignore[attr-defined]  # the straggler helper's accessor
    got, _ = _scrape(m)
    r = {i: (("rank", str(i)),) for i in range(4)}
    assert got[("dflash_rank_step_seconds", r[0])] == 2.0
    assert got[("dflash_rank_compute_seconds", r[2])] == 1.9
    assert got[("dflash_rank_wait_seconds", r[0])] == 1.1
    assert got[("dflash_rank_last_step", r[2])] == 499
    assert got[("dflash_rank_last_seen_timestamp_seconds", r[3])] == pytest.approx(T0 - 600)
    assert ("dflash_rank_step_seconds", r[3]) not in got  # a hung rank with no timing: absent, not 0
    assert [got[("dflash_rank_slow", r[i])] for i in range(4)] == [0, 0, 1, 0]
    assert [got[("dflash_rank_hung", r[i])] for i in range(4)] == [0, 0, 0, 1]
    assert got[("dflash_rank_info", (("gpu", "3"), ("rank", "3")))] == 1
    assert not any(name == "dflash_rank_info" and dict(labels)["rank"] == "2" for name, labels in got)


def test_xid_counters_per_gpu_and_code_present_at_zero_before_the_first() -> None:
    m = Monitor()
    m.feed_samples([_healthy(T0, gpu) for gpu in (0, 3, 5)])
    states = {3: _Gpu(xid_total=3, last_xid=79, xid_counts={48: 1, 79: 2}), 5: _Gpu(xid_total=1, last_xid=13)}
    m.detectors.gpu_health = lambda: states  # type: ignore[attr-defined]  # the gpu_health helper's accessor
    got, types = _scrape(m)
    assert types["dflash_gpu_xid"] == "counter" and types["dflash_gpu_xid_errors"] == "counter"
    assert got[("dflash_gpu_xid_total", (("code", "79"), ("gpu", "3")))] == 2
    assert got[("dflash_gpu_xid_total", (("code", "48"), ("gpu", "3")))] == 1
    # A state with only the total: counted under code="unknown", so sum by (gpu) stays right.
    assert got[("dflash_gpu_xid_total", (("code", "unknown"), ("gpu", "5")))] == 1
    assert [got[("dflash_gpu_xid_errors_total", (("gpu", g),))] for g in "035"] == [0, 3, 1]
    assert got[("dflash_gpu_last_xid", (("gpu", "3"),))] == 79
    assert ("dflash_gpu_last_xid", (("gpu", "0"),)) not in got


def test_a_run_without_the_health_detectors_exports_none_of_their_gauges() -> None:
    """The accessors answer None, [] and {} without their detectors: absent series, no failed scrape."""
    m = Monitor()
    m.feed_samples([_healthy(T0, 0)])
    m.feed_text("/runs/a/train.log", STEP.format(s=0, n=1, loss=2.3, g=1.0), 1, T0 + 1)
    m._detectors = DetectorSet([d for d in m._detectors  # type: ignore[assignment]
                                if d.name not in ("loss", "straggler", "gpu_health")])
    got, _ = _scrape(m)
    names = _names(got)
    assert not {n for n in names if n.startswith(("dflash_training_loss", "dflash_grad_norm", "dflash_rank_",
                                                  "dflash_gpu_last_xid"))}
    assert got[("dflash_loss_nan_total", ())] == 0  # counters stay there at 0 (increase() needs the first)
    assert got[("dflash_gpu_xid_errors_total", (("gpu", "0"),))] == 0
    assert not any(name == "dflash_gpu_xid_total" for name, _ in got)
    assert got[("dflash_gpu_temperature_celsius", (("gpu", "0"),))] == 71.0  # the samples' own fields stay
    assert got[("dflash_step", ())] == 1


@pytest.mark.parametrize(("line", "per_unit", "unit_label"), [
    (" 40%|####      | {n}/1000 [00:{s:02d}<04:45,  3.25it/s]\n", "dflash_throughput_steps_per_second",
     "iterations_per_second"),
    ("2026-11-29 10:00:{s:02d},000 - INFO - x - step {n}/1000 | loss 2.3 | 48.5 samples/s\n",
     "dflash_throughput_samples_per_second", "samples_per_second"),
])
def test_each_rate_unit_has_a_name_of_its_own_beside_the_labelled_one(line: str, per_unit: str,
                                                                       unit_label: str) -> None:
    m = Monitor()
    m.feed_text("/runs/a/train.log", "".join(line.format(n=i + 1, s=i) for i in range(4)), 1, T0 + 4)
    got, _ = _scrape(m)
    value = got[("dflash_throughput", (("unit", unit_label),))]  # the contract name stays
    assert got[(per_unit, ())] == value
    assert ("dflash_throughput_tokens_per_second", ()) not in got


def test_a_baseline_in_steps_per_second_has_its_own_name() -> None:
    m = Monitor()
    m.set_baseline(Baseline(3.5, {"throughput_unit": "it/s"}))
    got, _ = _scrape(m)
    assert got[("dflash_throughput_baseline", (("unit", "iterations_per_second"),))] == 3.5
    assert got[("dflash_throughput_baseline_steps_per_second", ())] == 3.5


def test_process_and_python_collectors_on_our_registry_only() -> None:
    got, types = _scrape(Monitor())
    names = _names(got)
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds",
            "python_info"} <= names
    assert any(n.startswith("python_gc_") for n in names)
    # Two sessions in one process: two registries, each with its own, no clash.
    _scrape(Monitor())
    assert b"dflash_" not in prometheus_client.generate_latest(prometheus_client.REGISTRY)


def test_the_real_detectors_fed_probe_lines_and_an_xid_give_the_rank_and_xid_series() -> None:
    """The same families from the straggler and gpu_health detectors themselves."""
    m = Monitor()
    if m.detectors.get("straggler") is None or m.detectors.get("gpu_health") is None:
        pytest.skip("the straggler / gpu_health detectors are not registered in this tree")
    m.feed_samples([GpuSample(T0 + t, g, GIB, 80 * GIB, temp_c=60.0, xid=(79,) if (g, t) == (3, 5) else None)
                    for t in range(10) for g in range(4)])
    m.feed_probes([ProbeSample(T0 + s + r / 100, rank=r, step=s, step_seconds=1.0,
                               compute_seconds=1.8 if r == 2 else 0.9, wait_seconds=0.1 if r == 2 else 1.0)
                   for s in range(1, 200) for r in range(4)])
    got, _ = _scrape(m)
    r2 = (("rank", "2"),)
    assert got[("dflash_rank_compute_seconds", r2)] == pytest.approx(1.8)
    assert got[("dflash_rank_wait_seconds", r2)] == pytest.approx(0.1)
    assert got[("dflash_rank_step_seconds", r2)] == pytest.approx(1.0)
    assert got[("dflash_rank_last_step", r2)] == 199
    assert [got[("dflash_rank_slow", (("rank", str(r)),))] for r in range(4)] == [0, 0, 1, 0]
    assert got[("dflash_alerts_firing", (("detector", "straggler"),))] == 1
    assert [got[("dflash_gpu_xid_errors_total", (("gpu", str(g)),))] for g in range(4)] == [0, 0, 0, 1]
    assert got[("dflash_gpu_last_xid", (("gpu", "3"),))] == 79
    assert sum(v for (name, labels), v in got.items()
               if name == "dflash_gpu_xid_total" and dict(labels)["gpu"] == "3") == 1
    assert got[("dflash_alerts_firing", (("detector", "gpu_health"),))] == 1
