"""A fake NVML: replaces ``pynvml`` module functions, as gpustat's tests do.

It raises the real binding's exception classes (``pynvml.NVMLError(code)``
builds ``NVMLError_NotSupported`` etc., and the unversioned process calls
raise ``NVMLLibraryMismatchError`` when the driver lacks the ``_v3`` entry
point), so the sampler is tested against the errors it will really meet.
"""

from __future__ import annotations

import queue
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import ClassVar

import pynvml

GiB = 1 << 30

FUNCTIONS = (
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    # health (issue 19)
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetIndex",
    # Xid events
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlEventSetFree",
)


@dataclass
class FakeGpu:
    """One fake device. ``not_supported``/``errors`` name what a call answers."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    total: int = 80 * GiB
    reserved: int = 512 << 20
    used: int = 10 * GiB
    util: int = 95
    compute: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, used)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)
    not_supported: set[str] = field(default_factory=set)  # "memory_v2", "memory", "util", "compute", "graphics"
    # ... and the health reads: "temp", "power", "power_limit", "sm_clock", "sm_clock_max",
    # "throttle" (both reason calls), "ecc", "remap", "retired", "pcie", "pcie_max", "pci", "events"
    errors: dict[str, int] = field(default_factory=dict)  # what -> NVML error code, every call
    lost: bool = False
    # -- health (issue 19), in NVML's own units ------------------------------
    temp: int = 45
    power_mw: int = 350_000
    power_limit_mw: int = 700_000
    sm_clock: int = 1980
    sm_clock_max: int = 1980
    reasons: int = 0  # clocks event/throttle reason bits
    ecc_uncorrected: int = 0
    remapped: tuple[int, int, int, int] = (0, 0, 0, 0)  # (correctable, uncorrectable, pending, failure)
    retired_pending: int = 0
    retired_dbe: list[int] = field(default_factory=list)
    retired_sbe: list[int] = field(default_factory=list)
    pcie_gen: int = 5
    pcie_gen_max: int = 5
    pcie_width: int = 16
    pcie_width_max: int = 16
    bus_id: str = "00000000:18:00.0"


class FakeNvml:
    """The state behind the patched functions; mutate it between samples."""

    def __init__(self, gpus: list[FakeGpu], driver: str = "550.54.15") -> None:
        self.gpus = gpus
        self.driver = driver
        self.init_error: int | None = None
        # Entry points the "driver" lacks: "nvmlDeviceGetMemoryInfo_v2",
        # "nvmlDeviceGetComputeRunningProcesses_v3", ..._v2 and so on.
        self.missing: set[str] = set()
        self.initialised = 0
        self.shutdowns = 0
        self.calls = 0
        self.counts: Counter[str] = Counter()  # per fake NVML function
        self.event_sets: list[FakeEventSet] = []
        self.event_create_error: int | None = None  # e.g. NOT_SUPPORTED: no event sets at all
        # The fake's event wait times out after at most this long, so that a
        # closing sampler's thread ends fast in tests (the real wait: 500 ms).
        self.wait_cap_ms = 50
        self.wait_error: int | None = None  # every event wait fails with this code (a broken set)

    @classmethod
    def eight(cls) -> FakeNvml:
        """Eight H100s running one 8-rank job (pids 1000..1007) plus a stray process."""
        gpus = [
            FakeGpu(
                uuid=f"GPU-{i:x}{i:x}a0b1c2-d3e4-f5a6-b7c8-d9e0f1a2b3c{i}",
                used=(60 + i) * GiB,
                util=90 + i,
                compute=[(1000 + i, (60 + i) * GiB - (1 << 30))],
                bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
            )
            for i in range(8)
        ]
        gpus[0].compute.append((4242, 1 << 30))
        return cls(gpus)

    # -- installation -----------------------------------------------------

    # Every fake installed by the test now running; ``tests/shell/conftest.py``
    # unloads them when it ends.
    installed: ClassVar[list[FakeNvml]] = []

    def install(self, monkeypatch) -> FakeNvml:
        """Patch through pytest's monkeypatch (undone after the test)."""
        for name in FUNCTIONS:
            monkeypatch.setattr(pynvml, name, self._counted(name))
        FakeNvml.installed.append(self)
        return self

    def unload(self) -> None:
        """The driver goes away: every event wait fails from now on.

        A sampler a test never closed keeps its Xid thread waiting on this
        fake (it took the wait function at start, so undoing the patch does
        not reach it). Unloaded, the thread ends on its own failure rule
        (five failed waits) instead of waking 20 times a second through
        every later test: 17 such threads starved a later test's reader
        thread of the GIL (0.4 s alone, 28 s in the full suite)."""
        self.wait_error = pynvml.NVML_ERROR_DRIVER_NOT_LOADED

    def _counted(self, name: str) -> Callable:
        fn = getattr(self, name)

        def call(*args, **kwargs):
            self.counts[name] += 1
            return fn(*args, **kwargs)

        call.__name__ = name
        return call

    def patch(self) -> Callable[[], None]:
        """Patch directly (for benchmarks); returns the undo."""
        saved = {name: getattr(pynvml, name) for name in FUNCTIONS}
        for name in FUNCTIONS:
            setattr(pynvml, name, self._counted(name))

        def undo() -> None:
            for name, fn in saved.items():
                setattr(pynvml, name, fn)

        return undo

    # -- the fake API -------------------------------------------------------

    def _gpu(self, handle: object, what: str) -> FakeGpu:
        self.calls += 1
        if self.initialised <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        gpu = self.gpus[handle.index]
        if gpu.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if what in gpu.errors:
            raise pynvml.NVMLError(gpu.errors[what])
        if what in gpu.not_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def _need(self, entry_point: str) -> None:
        if entry_point in self.missing:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        if self.initialised <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self.initialised -= 1
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        handle = SimpleNamespace(index=index)
        self._gpu(handle, "handle")
        return handle

    def nvmlDeviceGetName(self, handle) -> str:
        return self._gpu(handle, "name").name

    def nvmlDeviceGetUUID(self, handle) -> str:
        return self._gpu(handle, "uuid").uuid

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        if version:
            self._need("nvmlDeviceGetMemoryInfo_v2")
            if version != pynvml.nvmlMemory_v2:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            gpu = self._gpu(handle, "memory_v2")
            free = gpu.total - gpu.reserved - gpu.used
            return SimpleNamespace(version=version, total=gpu.total, reserved=gpu.reserved, free=free, used=gpu.used)
        gpu = self._gpu(handle, "memory")
        # v1 counts the driver's reservation as used, as real drivers do.
        used = gpu.used + gpu.reserved
        return SimpleNamespace(total=gpu.total, free=gpu.total - used, used=used)

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._gpu(handle, "util")
        return SimpleNamespace(gpu=gpu.util, memory=gpu.util // 2)

    def _procs(self, handle, kind: str, entry_point: str, unversioned: bool):
        if unversioned and entry_point in self.missing:
            # What pynvml's @throwOnVersionMismatch turns FunctionNotFound into.
            raise pynvml.NVMLLibraryMismatchError("Unversioned function called and the pyNVML version does not match")
        self._need(entry_point)
        gpu = self._gpu(handle, kind)
        rows = gpu.compute if kind == "compute" else gpu.graphics
        return [SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF) for pid, used in rows]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return self._procs(handle, "compute", "nvmlDeviceGetComputeRunningProcesses_v3", True)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle):
        return self._procs(handle, "compute", "nvmlDeviceGetComputeRunningProcesses_v2", False)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return self._procs(handle, "graphics", "nvmlDeviceGetGraphicsRunningProcesses_v3", True)

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle):
        return self._procs(handle, "graphics", "nvmlDeviceGetGraphicsRunningProcesses_v2", False)

    # -- health (issue 19) ----------------------------------------------------

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle, "temp").temp

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._gpu(handle, "power").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._gpu(handle, "power_limit").power_limit_mw

    def nvmlDeviceGetClockInfo(self, handle, kind):
        assert kind == pynvml.NVML_CLOCK_SM
        return self._gpu(handle, "sm_clock").sm_clock

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        assert kind == pynvml.NVML_CLOCK_SM
        return self._gpu(handle, "sm_clock_max").sm_clock_max

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self._need("nvmlDeviceGetCurrentClocksEventReasons")  # drivers before 535 lack it
        return self._gpu(handle, "throttle").reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self._gpu(handle, "throttle").reasons

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        assert (error_type, counter_type) == (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
        return self._gpu(handle, "ecc").ecc_uncorrected

    def nvmlDeviceGetRemappedRows(self, handle):
        return self._gpu(handle, "remap").remapped

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        return self._gpu(handle, "retired").retired_pending

    def nvmlDeviceGetRetiredPages(self, handle, cause):
        gpu = self._gpu(handle, "retired")
        return list(gpu.retired_dbe if cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR else gpu.retired_sbe)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return self._gpu(handle, "pcie").pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return self._gpu(handle, "pcie").pcie_width

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return self._gpu(handle, "pcie_max").pcie_gen_max

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return self._gpu(handle, "pcie_max").pcie_width_max

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=self._gpu(handle, "pci").bus_id.encode())

    def nvmlDeviceGetIndex(self, handle):
        return handle.index

    # -- Xid events ------------------------------------------------------------

    def nvmlEventSetCreate(self) -> FakeEventSet:
        if self.event_create_error is not None:
            raise pynvml.NVMLError(self.event_create_error)
        event_set = FakeEventSet()
        self.event_sets.append(event_set)
        return event_set

    def nvmlDeviceRegisterEvents(self, handle, event_types, event_set) -> None:
        self._gpu(handle, "events")
        assert event_types & pynvml.nvmlEventTypeXidCriticalError
        event_set.registered.add(handle.index)

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):
        event_set.waits += 1
        if self.wait_error is not None:
            raise pynvml.NVMLError(self.wait_error)
        try:
            index, code = event_set.queue.get(timeout=min(timeout_ms, self.wait_cap_ms) / 1000.0)
        except queue.Empty:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT) from None
        return SimpleNamespace(device=SimpleNamespace(index=index), eventType=pynvml.nvmlEventTypeXidCriticalError,
                               eventData=code, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)

    def nvmlEventSetFree(self, event_set) -> None:
        event_set.freed = True

    def push_xid(self, gpu: int, code: int) -> None:
        """The driver raises a critical Xid on ``gpu`` (every live event set sees it)."""
        for event_set in self.event_sets:
            if gpu in event_set.registered and not event_set.freed:
                event_set.queue.put((gpu, code))


class FakeEventSet:
    """What ``nvmlEventSetCreate`` returns: the test pushes events into it."""

    def __init__(self) -> None:
        self.queue: queue.Queue[tuple[int, int]] = queue.Queue()
        self.registered: set[int] = set()
        self.waits = 0
        self.freed = False
