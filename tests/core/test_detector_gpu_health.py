"""The ``gpu_health`` detector (CONTRACTS section 4): xid, ecc, thermal, power, pcie, lost.

Streams of 1 Hz samples of one or two GPUs; each kind fires once and
resolves, and the healthy shapes (a GPU at its power cap under full load,
a brief cap, an idle GPU's PCIe generation downshift, one thermal blip,
sample files without health fields) never fire.
"""

from __future__ import annotations

import doctest
import importlib
from dataclasses import replace

import pytest

from dflash_watch.detectors.base import Alert
from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.gpu_health import GpuHealth, GpuHealthState
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.detectors.xid_codes import XID_CODES, describe_xid
from dflash_watch.parsers.events import GpuLost, GpuSample, XidError

GiB = 1 << 30
HEALTHY = GpuSample(
    0.0, 0, 60 * GiB, 80 * GiB, util=0.95, source="gpu-samples",
    temp_c=70.0, power_w=650.0, power_limit_w=700.0, sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0, throttle=(),
    ecc_uncorrected=0, remap_pending=False, pcie_gen=5, pcie_gen_max=5, pcie_width=16, pcie_width_max=16,
)


def run(stream, detector: GpuHealth | None = None) -> list[Alert]:
    d = detector or GpuHealth()
    out: list[Alert] = []
    for event in stream:
        out += d.update(event)
    return out


def at(t: float, **changes) -> GpuSample:
    return replace(HEALTHY, time=t, **changes)


def states(alerts: list[Alert]) -> list[tuple[str | None, str, float]]:
    return [(a.kind, a.state, a.time) for a in alerts]


def test_the_doctest_runs() -> None:
    module = importlib.import_module("dflash_watch.detectors.gpu_health")
    assert doctest.testmod(module).failed == 0


def test_a_healthy_gpu_at_full_load_never_fires() -> None:
    assert run(at(float(t)) for t in range(3600)) == []


def test_xid_fires_once_per_code_episode_with_its_meaning_and_resolves() -> None:
    stream = [at(float(t)) for t in range(2000)]
    stream[10] = at(10.0, xid=(79,))
    stream[11] = at(11.0, xid=(79, 79))  # the same episode: no second alert
    stream[300] = at(300.0, xid=(79,))
    stream[400] = at(400.0, xid=(48,))  # a new code: news
    alerts = run(stream)
    assert states(alerts) == [("xid", "firing", 10.0), ("xid", "firing", 400.0), ("xid", "resolved", 1000.0)]
    first = alerts[0]
    assert first.severity == "critical" and first.gpu == 0 and first.detector == "gpu_health"
    assert "Xid 79" in first.message and "fallen off the bus" in first.message
    assert first.evidence["code"] == 79 and first.evidence["meaning"] == XID_CODES[79].meaning
    assert alerts[1].evidence["codes"] == [79, 48] and "double-bit" in alerts[1].message


def test_xid_counts_per_code_for_the_metrics() -> None:
    d = GpuHealth()
    run([at(0.0, xid=(79,)), at(1.0, xid=(79, 48)), at(2.0, gpu=1, xid=(13,))], d)
    assert d.state()[0].xid_counts == {79: 2, 48: 1} and d.state()[0].xid_total == 3
    assert d.state()[1].xid_counts == {13: 1}


def test_xid_of_an_application_fault_is_a_warning() -> None:
    (alert,) = run([at(0.0, xid=(13,))])
    assert alert.severity == "warning" and "Xid 13" in alert.message


def test_xid_error_events_count_where_the_gpu_is_known() -> None:
    d = GpuHealth()
    (alert,) = d.update(XidError(5.0, 94, gpu=2, message="pid=77, Contained: SM", source="kernel"))
    assert (alert.kind, alert.gpu, alert.severity, alert.source) == ("xid", 2, "critical", "kernel")
    assert "Contained: SM" in alert.message and alert.evidence["line"].startswith("pid=77")
    assert d.state()[2].xid_total == 1 and d.state()[2].last_xid == 94


def test_xid_table_covers_the_issue_codes() -> None:
    wanted = {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120}
    assert wanted <= set(XID_CODES)
    assert all(XID_CODES[c].meaning for c in wanted)
    assert XID_CODES[79].critical and XID_CODES[48].critical and not XID_CODES[13].critical
    assert not describe_xid(9999).critical and "catalog" in describe_xid(9999).meaning


def test_ecc_rise_fires_once_and_resolves_after_quiet() -> None:
    stream = [at(float(t)) for t in range(1500)]
    for t in range(100, 1500):
        stream[t] = at(float(t), ecc_uncorrected=1 if t < 200 else 2)
    alerts = run(stream)
    assert states(alerts) == [("ecc", "firing", 100.0), ("ecc", "resolved", 800.0)]
    assert alerts[0].severity == "critical" and "uncorrectable ECC" in alerts[0].message


def test_remap_pending_fires_and_resolves_once_applied() -> None:
    stream = [at(float(t), remap_pending=50 <= t < 900) for t in range(1600)]
    alerts = run(stream)
    assert states(alerts) == [("ecc", "firing", 50.0), ("ecc", "resolved", 900.0)]
    assert alerts[0].severity == "warning" and "pending" in alerts[0].message


def test_retired_pages_rising_fire_but_old_ones_do_not() -> None:
    assert run(at(float(t), retired_pages=3) for t in range(100)) == []  # history, not news
    alerts = run(at(float(t), retired_pages=3 if t < 50 else 4) for t in range(100))
    assert states(alerts) == [("ecc", "firing", 50.0)] and "retired page" in alerts[0].message


def thermal(t: float) -> GpuSample:
    return at(t, throttle=("thermal", "hw_slowdown"), sm_clock_mhz=1100.0, temp_c=92.0)


def test_sustained_thermal_throttle_fires_once_and_resolves() -> None:
    stream = [at(float(t)) for t in range(200)] + [thermal(float(t)) for t in range(200, 600)]
    stream += [at(float(t)) for t in range(600, 900)]
    alerts = run(stream)
    kinds = states(alerts)
    assert [k[:2] for k in kinds] == [("thermal", "firing"), ("thermal", "resolved")]
    fired, resolved = kinds[0][2], kinds[1][2]
    assert 290 <= fired <= 320 and 600 <= resolved <= 700
    assert "temperature" in alerts[0].message and "92 °C" in alerts[0].message


def test_throttle_is_judged_only_on_a_whole_window() -> None:
    # Throttled from the first sample: nothing until a whole window was seen.
    alerts = run(thermal(float(t)) for t in range(300))
    assert states(alerts) == [("thermal", "firing", 120.0)]


def test_one_thermal_blip_does_not_fire() -> None:
    stream = [thermal(float(t)) if 300 <= t < 330 else at(float(t)) for t in range(900)]
    assert run(stream) == []


def test_power_cap_under_full_load_is_normal() -> None:
    # Capped in every sample for an hour, the clock at 90% of max: normal.
    assert run(at(float(t), throttle=("power_cap",), sm_clock_mhz=1780.0, power_w=699.0) for t in range(3600)) == []


def test_a_brief_power_cap_with_clocks_down_does_not_fire() -> None:
    stream = [at(float(t), throttle=("power_cap",), sm_clock_mhz=1200.0) if 500 <= t < 540 else at(float(t))
              for t in range(1200)]
    assert run(stream) == []


def test_sustained_power_brake_fires_and_resolves() -> None:
    braked = ("power_brake", "hw_slowdown")
    stream = [at(float(t), throttle=braked, sm_clock_mhz=990.0) if 200 <= t < 700 else at(float(t)) for t in range(1000)]
    alerts = run(stream)
    assert [a[:2] for a in states(alerts)] == [("power", "firing"), ("power", "resolved")]
    assert "power limit" in alerts[0].message and alerts[0].evidence["median_clock_ratio"] == 0.5


def test_pcie_width_below_max_fires_sustained_and_resolves() -> None:
    stream = [at(float(t), pcie_width=8 if 100 <= t < 500 else 16) for t in range(800)]
    alerts = run(stream)
    assert states(alerts) == [("pcie", "firing", 220.0), ("pcie", "resolved", 560.0)]
    assert "x8 of x16" in alerts[0].message


def test_pcie_gen_below_max_under_load_fires() -> None:
    alerts = run(at(float(t), pcie_gen=3 if t >= 100 else 5) for t in range(400))
    assert states(alerts) == [("pcie", "firing", 220.0)] and "gen 3 of 5" in alerts[0].message


def test_idle_pcie_gen_downshift_does_not_fire() -> None:
    idle = [at(float(t), util=0.0, pcie_gen=1) for t in range(3600)]
    assert run(idle) == []
    # Idle between busy stretches at full gen: still nothing.
    mixed = [at(float(t), util=0.0, pcie_gen=1) if (t // 300) % 2 else at(float(t)) for t in range(3600)]
    assert run(mixed) == []


def test_lost_fires_once_from_a_sample_or_the_event_and_resolves_when_back() -> None:
    d = GpuHealth()
    (alert,) = d.update(GpuLost(10.0, 3, "GPU 3 lost: GPU is lost"))
    assert (alert.kind, alert.severity, alert.gpu) == ("lost", "critical", 3)
    assert d.update(GpuSample(10.0, 3, None, None, lost=True)) == []  # the same loss
    assert d.state()[3].lost and d.state()[3].firing == ("lost",)
    (back,) = d.update(replace(HEALTHY, gpu=3, time=500.0))
    assert (back.kind, back.state) == ("lost", "resolved")
    assert run([GpuSample(1.0, 1, None, None, lost=True, xid=(79,))]) and [
        a.kind for a in run([GpuSample(1.0, 1, None, None, lost=True, xid=(79,))])] == ["xid", "lost"]


def test_samples_without_health_fields_never_fire() -> None:
    assert run(GpuSample(float(t), t % 8, 10 * GiB, 80 * GiB, util=0.9) for t in range(5000)) == []


def test_state_for_the_dashboard() -> None:
    d = GpuHealth()
    run([at(0.0, xid=(13,)), thermal(1.0), at(2.0, gpu=1, ecc_uncorrected=3)], d)
    state = d.state()
    assert isinstance(state[0], GpuHealthState)
    assert (state[0].xid_total, state[0].last_xid, state[0].throttle, state[0].temp_c) == (1, 13, ("thermal", "hw_slowdown"), 92.0)
    assert state[0].firing == ("xid",) and state[1].ecc_uncorrected == 3 and state[1].firing == ("ecc",)


def test_registered_once_and_reachable_through_the_set() -> None:
    detectors = build_detectors()
    assert [d.name for d in detectors].count("gpu_health") == 1
    ds = DetectorSet(detectors)
    ds.update(at(0.0, gpu=4, xid=(79,)))
    assert ds.gpu_health()[4].last_xid == 79


@pytest.mark.parametrize("field", ["gpu_throttle_window_s", "gpu_pcie_sustain_s", "gpu_xid_repeat_s"])
def test_thresholds_come_from_the_config(field: str) -> None:
    assert getattr(DetectorConfig(), field) > 0
    c = replace(DetectorConfig(), gpu_pcie_sustain_s=10.0)
    alerts = run((at(float(t), pcie_width=8) for t in range(30)), GpuHealth(c))
    assert states(alerts) == [("pcie", "firing", 10.0)]


def test_a_kernel_xid_on_an_unmapped_bus_still_fires_once_naming_the_bus() -> None:
    d = GpuHealth()
    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
    first = d.update(XidError(1000.0, 79, None, line, "0000:3b:00", "kern.log:7"))
    again = d.update(XidError(1001.0, 79, None, line, "0000:3b:00", "kern.log:8"))
    (alert,) = first
    assert again == []
    assert (alert.detector, alert.kind, alert.gpu, alert.severity) == ("gpu_health", "xid", None, "critical")
    assert alert.message.startswith("GPU at PCI 0000:3b:00 Xid 79")
    assert alert.evidence["pci_bus"] == "0000:3b:00"
