"""The GPU health reads of one sample (issue 19), through the sampler's choke point.

Temperature, power against the enforced limit, the SM clock against its
maximum, the clocks event (throttle) reasons, volatile uncorrected ECC,
pending row remaps (or, before Ampere, retired pages), and the PCIe link
against its maximum. Every read goes through ``read`` (``GpuSampler._read``,
which calls ``GpuSampler._call``): a card that cannot answer one gets None
and is not asked again (remembered per GPU and field), and a lost GPU raises
out of here into the sampler, which reports it. What rarely changes (max
clocks and link, the power limit, the retired page count) is re-read only
every ``STATIC_EVERY`` samples: at 8 GPUs x 1 Hz every call counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

# The "what" names of the health reads: NoPermission also marks these
# unsupported (an unprivileged user stays one), unlike the memory reads.
HEALTH_FIELDS = frozenset({
    "temp", "power", "power_limit", "sm_clock", "sm_clock_max", "throttle", "throttle_old", "ecc",
    "remap", "retired_pending", "retired_dbe", "retired_sbe", "pcie_gen", "pcie_width", "pcie_gen_max",
    "pcie_width_max",
})
STATIC_EVERY = 60  # samples between re-reads of what rarely changes

# Clocks event (throttle) reason bits -> contract names (CONTRACTS section 3).
# GpuIdle, application/user clocks, sync boost and display clocks are not
# degradation and are left out.
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x40, "thermal"),  # HwThermalSlowdown
    (0x4, "power_cap"),  # SwPowerCap
    (0x8, "hw_slowdown"),  # HwSlowdown
    (0x80, "power_brake"),  # HwPowerBrakeSlowdown
    (0x20, "sw_thermal"),  # SwThermalSlowdown
)
# nvml.h enums, as literals so the hot path does no attribute look-ups.
_TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
_CLOCK_SM = 1  # NVML_CLOCK_SM
_ECC_UNCORRECTED, _ECC_VOLATILE = 1, 0  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC
_RETIRED_MULTIPLE_SBE, _RETIRED_DBE = 0, 1  # NVML_PAGE_RETIREMENT_CAUSE_*


class HealthGpu(Protocol):
    """What of the sampler's per-GPU state the reads use."""

    handle: object | None
    unsupported: set[str]
    static: dict[str, object]
    static_in: int


# read(gpu, what, nvml function name, *args) -> value, or None when unsupported.
Read = Callable[..., object]


def throttle_names(bits: int) -> tuple[str, ...]:
    """The contract names of the degradation reasons set in ``bits``."""
    return tuple(name for bit, name in THROTTLE_BITS if bits & bit)


def health_fields(gpu: HealthGpu, read: Read) -> dict[str, Any]:
    """The ``GpuSample`` health keyword arguments of one sample of ``gpu``."""
    h = gpu.handle
    temp = read(gpu, "temp", "nvmlDeviceGetTemperature", h, _TEMPERATURE_GPU)
    power = read(gpu, "power", "nvmlDeviceGetPowerUsage", h)
    sm = read(gpu, "sm_clock", "nvmlDeviceGetClockInfo", h, _CLOCK_SM)
    # Event reasons (drivers >= 535) replaced throttle reasons: the same bits.
    reasons = read(gpu, "throttle", "nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None and "throttle" in gpu.unsupported:
        reasons = read(gpu, "throttle_old", "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    ecc = read(gpu, "ecc", "nvmlDeviceGetTotalEccErrors", h, _ECC_UNCORRECTED, _ECC_VOLATILE)
    pending: bool | None = None
    rows = read(gpu, "remap", "nvmlDeviceGetRemappedRows", h)  # Ampere and newer
    if isinstance(rows, tuple) and len(rows) >= 3:
        pending = bool(rows[2])  # (correctable, uncorrectable, pending, failure)
    elif "remap" in gpu.unsupported:  # older GPUs retire pages instead
        flag = read(gpu, "retired_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h)
        pending = None if flag is None else bool(flag)
    gen = read(gpu, "pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", h)
    width = read(gpu, "pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", h)
    if gpu.static_in <= 0:  # after the remap read: it decides whether pages are counted
        read_static(gpu, read)
    gpu.static_in -= 1
    st = gpu.static
    return {
        "temp_c": _num(temp),
        "power_w": _num(power, 0.001),  # milliwatts
        "power_limit_w": _num(st.get("power_limit_w")),
        "sm_clock_mhz": _num(sm),
        "sm_clock_max_mhz": _num(st.get("sm_clock_max_mhz")),
        "throttle": throttle_names(reasons) if isinstance(reasons, int) else None,
        "ecc_uncorrected": _count(ecc),
        "remap_pending": pending,
        "retired_pages": _count(st.get("retired_pages")),
        "pcie_gen": _count(gen),
        "pcie_gen_max": _count(st.get("pcie_gen_max")),
        "pcie_width": _count(width),
        "pcie_width_max": _count(st.get("pcie_width_max")),
    }


def read_static(gpu: HealthGpu, read: Read) -> None:
    """Re-read what rarely changes into ``gpu.static`` (every STATIC_EVERY samples)."""
    h = gpu.handle
    limit = read(gpu, "power_limit", "nvmlDeviceGetEnforcedPowerLimit", h)
    retired: int | None = None
    if "remap" in gpu.unsupported:  # only GPUs without row remapping retire pages
        dbe = read(gpu, "retired_dbe", "nvmlDeviceGetRetiredPages", h, _RETIRED_DBE)
        sbe = read(gpu, "retired_sbe", "nvmlDeviceGetRetiredPages", h, _RETIRED_MULTIPLE_SBE)
        if isinstance(dbe, list) or isinstance(sbe, list):
            retired = (len(dbe) if isinstance(dbe, list) else 0) + (len(sbe) if isinstance(sbe, list) else 0)
    gpu.static = {
        "power_limit_w": _num(limit, 0.001),
        "sm_clock_max_mhz": _num(read(gpu, "sm_clock_max", "nvmlDeviceGetMaxClockInfo", h, _CLOCK_SM)),
        # The max of the GPU *and* its slot: what the link could run at here.
        "pcie_gen_max": _count(read(gpu, "pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", h)),
        "pcie_width_max": _count(read(gpu, "pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", h)),
        "retired_pages": retired,
    }
    gpu.static_in = STATIC_EVERY


def _num(value: object, scale: float = 1.0) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) * scale


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return int(value)
