"""The NVML health reads and Xid events (issue 19) against the fake NVML."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pynvml
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_nvml import FakeGpu, FakeNvml  # noqa: E402

from dflash_watch.parsers.events import GpuLost, GpuSample  # noqa: E402
from dflash_watch.sources.kernel_xid import KernelXidReader, parse_xid_line, pci_key  # noqa: E402
from dflash_watch.sources.nvml import GpuSampler  # noqa: E402
from dflash_watch.sources.nvml_health import STATIC_EVERY, throttle_names  # noqa: E402
from dflash_watch.sources.nvml_xid import XidInbox  # noqa: E402
from tests.shell.polling import polled  # noqa: E402


@pytest.fixture
def fake(monkeypatch) -> FakeNvml:
    return FakeNvml.eight().install(monkeypatch)


def by_gpu(batch) -> dict[int, GpuSample]:
    return {s.gpu: s for s in batch if isinstance(s, GpuSample)}


def test_every_health_field_is_read(fake: FakeNvml, tmp_path: Path) -> None:
    g = fake.gpus[4]
    g.temp, g.power_mw, g.power_limit_mw, g.sm_clock, g.sm_clock_max = 83, 612_345, 650_000, 1500, 1980
    g.reasons = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80 | 0x100  # every bit: idle/app/sync/display dropped
    g.ecc_uncorrected, g.remapped = 7, (3, 0, 1, 0)  # (correctable, uncorrectable, pending, failure)
    g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max = 3, 5, 8, 16
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        s = by_gpu(sampler.sample(1.0))[4]
    assert (s.temp_c, s.power_w, s.power_limit_w) == (83.0, pytest.approx(612.345), 650.0)
    assert (s.sm_clock_mhz, s.sm_clock_max_mhz) == (1500.0, 1980.0)
    assert s.throttle == ("thermal", "power_cap", "hw_slowdown", "power_brake", "sw_thermal")
    assert (s.ecc_uncorrected, s.remap_pending, s.retired_pages) == (7, True, None)
    assert (s.pcie_gen, s.pcie_gen_max, s.pcie_width, s.pcie_width_max) == (3, 5, 8, 16)
    assert s.xid is None and s.lost is None


def test_throttle_bits_map_to_contract_names() -> None:
    assert throttle_names(0) == ()
    assert throttle_names(pynvml.nvmlClocksEventReasonGpuIdle | pynvml.nvmlClocksEventReasonApplicationsClocksSetting) == ()
    assert throttle_names(pynvml.nvmlClocksEventReasonHwThermalSlowdown) == ("thermal",)
    assert throttle_names(pynvml.nvmlClocksEventReasonSwPowerCap) == ("power_cap",)
    assert throttle_names(pynvml.nvmlClocksEventReasonHwSlowdown) == ("hw_slowdown",)
    assert throttle_names(pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown) == ("power_brake",)
    assert throttle_names(pynvml.nvmlClocksEventReasonSwThermalSlowdown) == ("sw_thermal",)
    assert throttle_names(pynvml.nvmlClocksThrottleReasonSwPowerCap) == ("power_cap",)  # the old names: same bits


@pytest.mark.parametrize(
    "code",
    [pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND],
)
def test_unsupported_health_reads_are_absent_and_not_asked_again(fake: FakeNvml, tmp_path: Path, code: int) -> None:
    whats = ("temp", "power", "power_limit", "sm_clock", "sm_clock_max", "throttle", "ecc", "remap", "retired", "pcie",
             "pcie_max")
    fake.gpus[1].errors = {w: code for w in whats}
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        first = by_gpu(sampler.sample(1.0))
        before = dict(fake.counts)
        for t in range(2, 2 + STATIC_EVERY + 2):
            batch = by_gpu(sampler.sample(float(t)))
        after = fake.counts
    s = batch[1]
    for key in ("temp_c", "power_w", "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz", "throttle", "ecc_uncorrected",
                "remap_pending", "retired_pages", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max"):
        assert getattr(s, key) is None and getattr(first[1], key) is None, key
    assert s.used_bytes is not None and batch[0].temp_c == 45.0  # the rest goes on
    # Over 60+ more samples, the other 7 GPUs are asked each time; GPU 1 never again.
    rounds = STATIC_EVERY + 2
    assert after["nvmlDeviceGetTemperature"] - before["nvmlDeviceGetTemperature"] == 7 * rounds
    assert after["nvmlDeviceGetCurrPcieLinkWidth"] - before["nvmlDeviceGetCurrPcieLinkWidth"] == 7 * rounds
    assert after["nvmlDeviceGetRetiredPagesPendingStatus"] == before.get("nvmlDeviceGetRetiredPagesPendingStatus", 0)
    assert after["nvmlDeviceGetCurrentClocksThrottleReasons"] == before["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1
    # The static reads are refreshed once per STATIC_EVERY samples, not every sample.
    assert after["nvmlDeviceGetMaxPcieLinkWidth"] - before["nvmlDeviceGetMaxPcieLinkWidth"] == 7


def test_a_passing_error_is_asked_again(fake: FakeNvml, tmp_path: Path) -> None:
    fake.gpus[0].errors = {"temp": pynvml.NVML_ERROR_UNKNOWN}
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        assert by_gpu(sampler.sample(1.0))[0].temp_c is None
        fake.gpus[0].errors = {}
        assert by_gpu(sampler.sample(2.0))[0].temp_c == 45.0


def test_old_driver_without_event_reasons_falls_back_to_throttle_reasons(fake: FakeNvml, tmp_path: Path) -> None:
    fake.missing.add("nvmlDeviceGetCurrentClocksEventReasons")
    fake.gpus[2].reasons = 0x4
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        assert by_gpu(sampler.sample(1.0))[2].throttle == ("power_cap",)
        assert by_gpu(sampler.sample(2.0))[2].throttle == ("power_cap",)
        notes = sampler.drain_notices()
    assert fake.counts["nvmlDeviceGetCurrentClocksEventReasons"] == 8  # once per GPU, then not again
    assert sum("nvmlDeviceGetCurrentClocksEventReasons" in n for n in notes) == 1


def test_pre_ampere_gpu_reports_retired_pages_and_pending(fake: FakeNvml, tmp_path: Path) -> None:
    g = fake.gpus[3]
    g.not_supported = {"remap"}
    g.retired_dbe, g.retired_sbe, g.retired_pending = [0x1000, 0x2000], [0x3000], 1
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        s = by_gpu(sampler.sample(1.0))[3]
    assert (s.retired_pages, s.remap_pending) == (3, True)


def test_gpu_lost_during_a_health_read_is_reported_once(fake: FakeNvml, tmp_path: Path) -> None:
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        sampler.sample(1.0)
        fake.gpus[5].errors = {"ecc": pynvml.NVML_ERROR_GPU_IS_LOST}
        batch = sampler.sample(2.0)
        lost = [e for e in batch if isinstance(e, GpuLost)]
        assert [e.gpu for e in lost] == [5]
        assert by_gpu(batch)[5].lost is True
        again = sampler.sample(3.0)
    assert not any(isinstance(e, GpuLost) for e in again) and 5 not in by_gpu(again)


# -- Xid: NVML's event set, waited on in its own thread ------------------------


def test_xid_event_thread_delivers_into_the_next_sample_and_stops_on_close(fake: FakeNvml, tmp_path: Path) -> None:
    others = _xid_threads()  # samplers other tests left open (not ours to judge)
    sampler = GpuSampler(proc_root=str(tmp_path), kmsg_path=None)
    thread = sampler.xid_thread
    assert thread is not None and thread.is_alive() and thread.registered == list(range(8))
    assert sampler.sample(1.0)[0].xid is None
    fake.push_xid(6, 79)
    fake.push_xid(6, 48)
    fake.push_xid(1, 13)
    assert polled(lambda: sampler._inbox.received == 3)
    batch = by_gpu(sampler.sample(2.0))
    assert batch[6].xid == (79, 48) and batch[1].xid == (13,) and batch[0].xid is None
    assert by_gpu(sampler.sample(3.0))[6].xid is None  # codes since the previous sample only
    started = time.monotonic()
    sampler.close()
    assert time.monotonic() - started < 1.0
    assert not thread.is_alive() and fake.event_sets[0].freed
    assert _xid_threads() <= others


def test_close_stops_the_xid_thread_within_a_second_on_the_real_wait(fake: FakeNvml, tmp_path: Path) -> None:
    fake.wait_cap_ms = 10_000  # the fake now waits the whole 500 ms the sampler asks for
    sampler = GpuSampler(proc_root=str(tmp_path), kmsg_path=None)
    assert polled(lambda: fake.event_sets[0].waits >= 1)
    started = time.monotonic()
    sampler.close()
    assert time.monotonic() - started < 1.0 and not sampler.xid_thread


def test_a_broken_event_wait_ends_the_thread_with_one_notice(fake: FakeNvml, tmp_path: Path) -> None:
    notes: list[str] = []
    sampler = GpuSampler(proc_root=str(tmp_path), kmsg_path=None, on_notice=notes.append)
    try:
        thread = sampler.xid_thread
        assert thread is not None
        fake.wait_error = pynvml.NVML_ERROR_UNKNOWN
        assert polled(lambda: not thread.is_alive())
        assert sum("Xid event wait failed" in n for n in notes) == 1
        assert len(by_gpu(sampler.sample(1.0))) == 8  # the sampler goes on
    finally:
        sampler.close()


def _xid_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "nvml-xid" and t.is_alive()}


@pytest.mark.parametrize("where", ["create", "register"])
def test_no_event_support_is_one_notice_and_no_thread(monkeypatch, tmp_path: Path, where: str) -> None:
    fake = FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b")]).install(monkeypatch)
    if where == "create":
        fake.event_create_error = pynvml.NVML_ERROR_NOT_SUPPORTED
    else:
        for g in fake.gpus:
            g.not_supported = {"events"}
    others = _xid_threads()
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        assert sampler.xid_thread is None
        notes = [n for n in sampler.drain_notices() if "Xid" in n]
        assert len(notes) == 1
        assert by_gpu(sampler.sample(1.0))[0].temp_c == 45.0
    assert _xid_threads() <= others


def test_one_gpu_without_events_leaves_the_others_registered(monkeypatch, tmp_path: Path) -> None:
    FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b", not_supported={"events"})]).install(monkeypatch)
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=None) as sampler:
        assert sampler.xid_thread is not None and sampler.xid_thread.registered == [0]


# -- Xid: the kernel's NVRM lines ----------------------------------------------


def test_kernel_xid_lines_are_parsed() -> None:
    line = "6,1234,567890,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
    assert parse_xid_line(line) == ((0, 0x3B, 0), 79, "pid=1234, name=python, GPU has fallen off the bus.")
    assert parse_xid_line("kernel: NVRM: Xid (0000:01:00): 13, Graphics Exception")[:2] == ((0, 1, 0), 13)
    assert parse_xid_line("NVRM: GPU at PCI:0000:3b:00: GPU-0b11") is None
    assert parse_xid_line("usb 1-1: new device") is None
    assert pci_key("00000000:3B:00.0") == pci_key(b"0000:3b:00") == (0, 0x3B, 0)
    assert pci_key("garbage") is None


def test_kernel_xid_merges_into_the_sample_without_double_counting(fake: FakeNvml, tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("NVRM: Xid (PCI:0000:28:00): 31, old: before the watcher started\n")
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=str(kmsg)) as sampler:
        assert sampler.sample(1.0)[1].xid is None  # the old line is history
        fake.push_xid(1, 94)  # GPU 1 is bus 0x28 in FakeNvml.eight()
        assert polled(lambda: sampler._inbox.received == 1)
        with kmsg.open("a") as f:
            f.write("NVRM: Xid (PCI:0000:28:00): 94, pid=77, name=python, Contained: SM (0x1)\n")
            f.write("NVRM: Xid (PCI:0000:58:00): 61, pid=0, PMU breakpoint\n")  # GPU 4: only the kernel saw it
            f.write("NVRM: Xid (PCI:0000:ff:00): 79, not one of ours\n")
        batch = by_gpu(sampler.sample(2.0))
        assert batch[1].xid == (94,)  # NVML's and the kernel's copy: one
        assert batch[4].xid == (61,)
        assert sampler._inbox.duplicates == 1


def test_unreadable_kernel_log_is_silently_off(fake: FakeNvml, tmp_path: Path) -> None:
    assert not KernelXidReader(str(tmp_path / "absent")).readable
    with GpuSampler(proc_root=str(tmp_path), kmsg_path=str(tmp_path / "absent")) as sampler:
        assert len(by_gpu(sampler.sample(1.0))) == 8
        assert not any("kmsg" in n or "kernel" in n for n in sampler.drain_notices())


def test_inbox_dedupes_across_sources_only_within_the_window() -> None:
    now = [100.0]
    inbox = XidInbox(dedupe_s=5.0, clock=lambda: now[0])
    assert inbox.put(0, 79, "nvml") and not inbox.put(0, 79, "kernel")
    assert inbox.put(0, 79, "nvml")  # the same source again is a second Xid
    now[0] += 6.0
    assert inbox.put(0, 79, "kernel")
    assert inbox.take(0) == (79, 79, 79) and inbox.take(0) is None
