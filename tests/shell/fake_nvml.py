"""A fake NVML: replaces ``pynvml`` module functions, as gpustat's tests do.

It raises the real binding's exception classes (``pynvml.NVMLError(code)``
builds ``NVMLError_NotSupported`` etc., and the unversioned process calls
raise ``NVMLLibraryMismatchError`` when the driver lacks the ``_v3`` entry
point), so the sampler is tested against the errors it will really meet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

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
    errors: dict[str, int] = field(default_factory=dict)  # what -> NVML error code, every call
    lost: bool = False


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

    @classmethod
    def eight(cls) -> FakeNvml:
        """Eight H100s running one 8-rank job (pids 1000..1007) plus a stray process."""
        gpus = [
            FakeGpu(
                uuid=f"GPU-{i:x}{i:x}a0b1c2-d3e4-f5a6-b7c8-d9e0f1a2b3c{i}",
                used=(60 + i) * GiB,
                util=90 + i,
                compute=[(1000 + i, (60 + i) * GiB - (1 << 30))],
            )
            for i in range(8)
        ]
        gpus[0].compute.append((4242, 1 << 30))
        return cls(gpus)

    # -- installation -----------------------------------------------------

    def install(self, monkeypatch) -> FakeNvml:
        """Patch through pytest's monkeypatch (undone after the test)."""
        for name in FUNCTIONS:
            monkeypatch.setattr(pynvml, name, getattr(self, name))
        return self

    def patch(self) -> Callable[[], None]:
        """Patch directly (for benchmarks); returns the undo."""
        saved = {name: getattr(pynvml, name) for name in FUNCTIONS}
        for name in FUNCTIONS:
            setattr(pynvml, name, getattr(self, name))

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
