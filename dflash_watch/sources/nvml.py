"""Per-GPU memory sampling through NVML (nvidia-ml-py, module ``pynvml``).

The watcher's first promise is to notice when GPU memory stops being flat, so
this sampler must be cheap, run for days, and never take the watcher down:
every NVML call that fails becomes a "not available" value (None) in the
sample, a lost GPU becomes one ``GpuLost`` event while the others keep going,
and a machine without a driver gets one clear message instead of a crash.

``pynvml`` is imported inside ``GpuSampler`` (not at module import) so that
``dflash-watch --help`` stays light, and every NVML function is looked up on
the module at call time so tests can monkeypatch it (as gpustat's do).
"""

from __future__ import annotations

import atexit
import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Final, Literal, Protocol, overload

from dflash_watch.parsers.events import GpuLost, GpuProcess, GpuSample

from ..procfs import proc_name
from .kernel_xid import KMSG, KernelXidReader, PciKey, pci_key
from .nvml_health import HEALTH_FIELDS, health_fields
from .nvml_select import select_gpus
from .nvml_xid import XidEventThread, XidInbox

DEFAULT_INTERVAL = 1.0  # seconds between samples unless configured
UNAVAILABLE_HINT = "GPU panels off; pass --gpu-samples FILE to read samples from a file"

# NVML return codes (stable across nvidia-ml-py releases); kept here so that
# pure helpers need not import pynvml.
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_NOT_FOUND = 6
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_RESET_REQUIRED = 16
_ARGUMENT_VERSION_MISMATCH = 25
# Both mean "this GPU is unusable until reset": report it lost, stop calling it.
_LOST_CODES = frozenset({_GPU_IS_LOST, _RESET_REQUIRED})

_ProcFn = Literal[
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
]
_COMPUTE_FNS: tuple[_ProcFn, ...] = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2")
_GRAPHICS_FNS: tuple[_ProcFn, ...] = (
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
)


# pynvml is unannotated: these say which fields of its ctypes structures the
# sampler reads, so that the one choke point (GpuSampler._call) returns types.
class _Utilization(Protocol):
    """``c_nvmlUtilization_t``: percent busy over the driver's last window."""

    @property
    def gpu(self) -> int: ...


class _Memory(Protocol):
    """``c_nvmlMemory_t`` / ``c_nvmlMemory_v2_t``, in bytes."""

    @property
    def used(self) -> int: ...

    @property
    def total(self) -> int: ...


class _Process(Protocol):
    """``c_nvmlProcessInfo_t``; ``usedGpuMemory`` is None when NVML cannot say."""

    @property
    def pid(self) -> int: ...

    @property
    def usedGpuMemory(self) -> int | None: ...  # pynvml's spelling


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """What does not change while a GPU is watched (None: NVML could not say)."""

    index: int
    name: str | None
    uuid: str | None
    total_bytes: int | None


class _NA(enum.Enum):
    """Marker for "this call gave no value" (distinct from a legitimate None).

    An enum member so that ``x is _NA_VALUE`` narrows ``x`` for mypy.
    """

    VALUE = "n/a"


_NA_VALUE: Final = _NA.VALUE


class _Lost(Exception):
    """Raised inside the sampler only: the GPU fell off the bus."""


@dataclass(slots=True)
class _Gpu:
    index: int
    handle: object | None
    info: GpuInfo
    mem_v2: bool = True
    unsupported: set[str] = field(default_factory=set)
    lost: bool = False
    lost_message: str | None = None
    lost_reported: bool = False
    # Static health reads (see STATIC_EVERY) and the samples until the next.
    static: dict[str, object] = field(default_factory=dict)
    static_in: int = 0


class GpuSampler:
    """NVML, initialised once; ``sample(now)`` reads every selected GPU.

    Construction never raises: without NVML, ``available`` is False,
    ``unavailable`` holds the one message to show, and ``sample`` returns [].
    Notices (driver/binding mismatch, skipped GPUs...) are reported once
    each, through ``on_notice`` and ``drain_notices()``.
    """

    def __init__(
        self,
        indices: Iterable[int] | None = None,
        cuda_visible_devices: str | None = None,
        on_notice: Callable[[str], None] | None = None,
        proc_root: str = "/proc",
        health: bool = True,
        xid_events: bool = True,
        kmsg_path: str | None = KMSG,
    ) -> None:
        self._on_notice = on_notice
        self._notices: list[str] = []
        self._noticed: set[str] = set()
        self._proc_root = proc_root
        self._job_pids: frozenset[int] = frozenset()
        self._names: dict[int, str] = {}
        self._missing: set[str] = set()
        self._have: set[str] = set()  # NVML functions the binding was seen to have
        self._proc_fns: dict[str, list[_ProcFn]] = {"compute": list(_COMPUTE_FNS), "graphics": list(_GRAPHICS_FNS)}
        self._gpus: list[_Gpu] = []
        self._nv: ModuleType | None = None
        # Health reads (temperature, power, clocks, throttle, ECC, PCIe) and
        # Xid codes (NVML's event thread and the kernel log, met in _inbox).
        self._health = health
        self._inbox = XidInbox()
        self.xid_thread: XidEventThread | None = None
        self._kernel: KernelXidReader | None = None
        self._pci: dict[PciKey, int] | None = None
        self.unavailable: str | None = None
        self.driver_version: str | None = None
        try:
            import pynvml  # type: ignore[import-untyped]  # nvidia-ml-py ships no stubs nor py.typed

            pynvml.nvmlInit()
        except Exception as err:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded...
            reason = "nvidia-ml-py is not installed" if isinstance(err, ImportError) else _describe(err)
            self.unavailable = f"NVML not available: {reason}; {UNAVAILABLE_HINT}"
            self.notify(self.unavailable)
            return
        self._nv = pynvml
        atexit.register(self.close)
        try:
            self.driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception:
            self.driver_version = None
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except Exception as err:
            self.unavailable = f"NVML not available: cannot count GPUs ({_describe(err)}); {UNAVAILABLE_HINT}"
            self.notify(self.unavailable)
            self.close()
            return
        every = [self._open_gpu(i) for i in range(count)]
        chosen, notices = select_gpus([g.info.uuid for g in every], indices, cuda_visible_devices)
        for message in notices:
            self.notify(message)
        self._gpus = [every[i] for i in chosen]
        if xid_events:
            handles = [(g.index, g.handle) for g in self._gpus if g.handle is not None and not g.lost]
            thread = XidEventThread(pynvml, handles, self._inbox, on_notice=self.notify)
            if handles and thread.start():
                self.xid_thread = thread
        if kmsg_path:
            reader = KernelXidReader(kmsg_path)
            self._kernel = reader if reader.readable else None

    # -- public surface -------------------------------------------------

    @property
    def available(self) -> bool:
        return self._nv is not None

    @property
    def gpus(self) -> list[GpuInfo]:
        return [g.info for g in self._gpus]

    @property
    def job_pids(self) -> frozenset[int]:
        return self._job_pids

    @job_pids.setter
    def job_pids(self, pids: Iterable[int]) -> None:
        # One reference swap: safe while the sampler thread reads it.
        self._job_pids = frozenset(pids)

    def drain_notices(self) -> list[str]:
        out, self._notices = self._notices, []
        return out

    def sample(self, now: float) -> list[GpuSample | GpuLost]:
        """One sample per watched GPU; a GPU that is lost yields GpuLost once."""
        if self._nv is None:
            return []
        out: list[GpuSample | GpuLost] = []
        names = self._names
        self._names = {}
        if self._kernel is not None:
            self._read_kernel_xids()
        for gpu in self._gpus:
            if gpu.lost:
                if not gpu.lost_reported:
                    gpu.lost_reported = True
                    out.append(GpuLost(now, gpu.index, gpu.lost_message or f"GPU {gpu.index} lost"))
                    out.append(self._lost_sample(gpu, now))
                continue
            try:
                out.append(self._sample_gpu(gpu, now, names))
            except _Lost as err:
                self._mark_lost(gpu, str(err))
                gpu.lost_reported = True
                out.append(GpuLost(now, gpu.index, gpu.lost_message or ""))
                out.append(self._lost_sample(gpu, now))
        return out

    def _lost_sample(self, gpu: _Gpu, now: float) -> GpuSample:
        """The sample line of a lost GPU: ``lost`` (and its last Xids) reach
        the detectors and ``--record-gpu`` files, where GpuLost does not."""
        return GpuSample(now, gpu.index, None, None, source="nvml", xid=self._inbox.take(gpu.index), lost=True)

    def _read_kernel_xids(self) -> None:
        assert self._kernel is not None
        hits = self._kernel.poll()
        if not hits:
            return
        if self._pci is None:
            self._pci = {}
            for gpu in self._gpus:
                if gpu.handle is None or "pci" in gpu.unsupported:
                    continue
                try:
                    info = self._call(gpu, "pci", "nvmlDeviceGetPciInfo", gpu.handle)
                except _Lost:
                    continue
                key = None if info is _NA_VALUE else pci_key(getattr(info, "busId", b""))
                if key is not None:
                    self._pci[key] = gpu.index
        for key, code, _message in hits:
            index = self._pci.get(key)
            if index is not None:
                self._inbox.put(index, code, "kernel")

    def close(self) -> None:
        """Shut NVML down (once; also run at exit)."""
        thread, self.xid_thread = self.xid_thread, None
        if thread is not None:
            thread.stop()  # before nvmlShutdown: the wait uses the event set
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            kernel.close()
        nv, self._nv = self._nv, None
        if nv is None:
            return
        atexit.unregister(self.close)
        try:
            nv.nvmlShutdown()
        except Exception:
            pass

    def __enter__(self) -> GpuSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------

    def notify(self, message: str, key: str | None = None) -> None:
        """Report ``message`` once (per ``key``) to ``on_notice`` and ``drain_notices``."""
        key = message if key is None else key
        if key in self._noticed:
            return
        self._noticed.add(key)
        self._notices.append(message)
        if self._on_notice is not None:
            try:
                self._on_notice(message)
            except Exception:
                pass

    def _open_gpu(self, index: int) -> _Gpu:
        gpu = _Gpu(index, None, GpuInfo(index, None, None, None), unsupported=set())
        try:
            gpu.handle = self._call(gpu, "handle", "nvmlDeviceGetHandleByIndex", index)
        except _Lost as err:
            self._mark_lost(gpu, str(err))
            return gpu
        if gpu.handle is _NA_VALUE:
            gpu.handle = None
            return gpu
        try:
            name = self._call(gpu, "name", "nvmlDeviceGetName", gpu.handle)
            uuid = self._call(gpu, "uuid", "nvmlDeviceGetUUID", gpu.handle)
            used, total = self._memory(gpu)
        except _Lost as err:
            self._mark_lost(gpu, str(err))
            return gpu
        gpu.info = GpuInfo(
            index,
            None if name is _NA_VALUE else _text(name),
            None if uuid is _NA_VALUE else _text(uuid),
            total,
        )
        return gpu

    def _mark_lost(self, gpu: _Gpu, reason: str) -> None:
        gpu.lost = True
        label = " ".join(x for x in (gpu.info.name, gpu.info.uuid) if x)
        gpu.lost_message = f"GPU {gpu.index} lost: {reason}" + (f" ({label})" if label else "")

    def _sample_gpu(self, gpu: _Gpu, now: float, names: dict[int, str]) -> GpuSample:
        if gpu.handle is None:  # could not open it at start; it may have come back
            fresh = self._open_gpu(gpu.index)
            if fresh.lost:
                raise _Lost((fresh.lost_message or "").partition(": ")[2])
            if fresh.handle is None:
                return GpuSample(now, gpu.index, None, None, source="nvml")
            gpu.handle, gpu.info, gpu.mem_v2, gpu.unsupported = fresh.handle, fresh.info, fresh.mem_v2, fresh.unsupported
        used, total = self._memory(gpu)
        util = None
        if "util" not in gpu.unsupported:
            rates = self._call(gpu, "util", "nvmlDeviceGetUtilizationRates", gpu.handle)
            if rates is not _NA_VALUE:
                util = min(max(float(rates.gpu) / 100.0, 0.0), 1.0)
        procs = self._processes(gpu, names)
        xid = self._inbox.take(gpu.index)
        if not self._health:
            return GpuSample(now, gpu.index, used, total, util, procs, source="nvml", xid=xid)
        return GpuSample(now, gpu.index, used, total, util, procs, source="nvml", xid=xid, **health_fields(gpu, self._read))

    def _read(self, gpu: _Gpu, what: str, fn_name: str, *args: object) -> object | None:
        """One health read; None when unsupported (asked once, then remembered)."""
        if what in gpu.unsupported:
            return None
        if fn_name not in self._have:
            if not hasattr(self._module(), fn_name):  # an older nvidia-ml-py
                gpu.unsupported.add(what)
                return None
            self._have.add(fn_name)
        value = self._call(gpu, what, fn_name, *args)
        return None if value is _NA_VALUE else value

    def _memory(self, gpu: _Gpu) -> tuple[int | None, int | None]:
        # v2 separates driver-reserved memory from "used"; once a GPU turns
        # out not to have it, stay on v1 so the series does not jump.
        if gpu.mem_v2:
            version = self._module().nvmlMemory_v2
            mem = self._call(gpu, "memory_v2", "nvmlDeviceGetMemoryInfo", gpu.handle, version=version)
            if mem is not _NA_VALUE:
                return int(mem.used), int(mem.total)
            if "memory_v2" not in gpu.unsupported:
                return None, None  # a passing error: try v2 again next time
            gpu.mem_v2 = False
        if "memory" in gpu.unsupported:
            return None, None
        mem = self._call(gpu, "memory", "nvmlDeviceGetMemoryInfo", gpu.handle)
        if mem is _NA_VALUE:
            return None, None
        return int(mem.used), int(mem.total)

    def _processes(self, gpu: _Gpu, names: dict[int, str]) -> tuple[GpuProcess, ...] | None:
        merged: dict[int, int] = {}
        seen_any = False
        for kind, fns in self._proc_fns.items():
            if kind in gpu.unsupported:
                continue
            while fns:
                result = self._call(gpu, kind, fns[0], gpu.handle)
                if result is _NA_VALUE and fns[0] in self._missing:
                    fns.pop(0)  # binding newer than the driver: try the older entry point
                    continue
                break
            if not fns or result is _NA_VALUE:
                continue
            seen_any = True
            for proc in result:
                pid = int(proc.pid)
                used = proc.usedGpuMemory
                used = int(used) if used is not None else 0
                # A process with compute and graphics contexts is listed in
                # both with the same memory: merge, do not add.
                if used > merged.get(pid, -1):
                    merged[pid] = used
        if not seen_any:
            return None
        job = self._job_pids
        procs = []
        for pid, used in merged.items():
            name = names.get(pid)
            if name is None:
                name = proc_name(pid, self._proc_root)
            self._names[pid] = name
            procs.append(GpuProcess(pid, used, name, pid in job))
        procs.sort(key=lambda p: (-p.used_bytes, p.pid))
        return tuple(procs)

    def _module(self) -> ModuleType:
        nv = self._nv
        if nv is None:  # close() ran (another thread, or at exit) while a sample was in flight
            raise AttributeError("NVML was shut down")
        return nv

    # The choke point: every NVML call goes through _call, so its overloads
    # are where pynvml's untyped results get their types.
    @overload
    def _call(
        self, gpu: _Gpu, what: str, fn_name: Literal["nvmlDeviceGetUtilizationRates"], *args: object, **kwargs: object
    ) -> _Utilization | Literal[_NA.VALUE]: ...
    @overload
    def _call(
        self, gpu: _Gpu, what: str, fn_name: Literal["nvmlDeviceGetMemoryInfo"], *args: object, **kwargs: object
    ) -> _Memory | Literal[_NA.VALUE]: ...
    @overload
    def _call(
        self, gpu: _Gpu, what: str, fn_name: _ProcFn, *args: object, **kwargs: object
    ) -> Sequence[_Process] | Literal[_NA.VALUE]: ...
    @overload
    def _call(
        self,
        gpu: _Gpu,
        what: str,
        fn_name: Literal["nvmlDeviceGetName", "nvmlDeviceGetUUID"],
        *args: object,
        **kwargs: object,
    ) -> str | bytes | Literal[_NA.VALUE]: ...
    @overload
    def _call(
        self, gpu: _Gpu, what: str, fn_name: Literal["nvmlDeviceGetHandleByIndex"], *args: object, **kwargs: object
    ) -> object: ...
    @overload
    def _call(self, gpu: _Gpu, what: str, fn_name: str, *args: object, **kwargs: object) -> object: ...
    def _call(self, gpu: _Gpu, what: str, fn_name: str, *args: object, **kwargs: object) -> object:
        """Call one NVML function; its failure becomes _NA (or _Lost for a lost GPU)."""
        nv = self._module()
        try:
            return getattr(nv, fn_name)(*args, **kwargs)
        except nv.NVMLError as err:
            code = getattr(err, "value", None)
            if code in _LOST_CODES:
                raise _Lost(_describe(err)) from None
            if code == _FUNCTION_NOT_FOUND:
                self._missing_function(fn_name, what, gpu)
            elif code in (_NOT_SUPPORTED, _ARGUMENT_VERSION_MISMATCH):
                gpu.unsupported.add(what)
            elif code == _NO_PERMISSION and what in HEALTH_FIELDS:
                gpu.unsupported.add(what)  # an unprivileged user stays one
            elif code == _NOT_FOUND and what in ("compute", "graphics"):
                return []  # some drivers say "not found" for "no processes"
            return _NA_VALUE
        except nv.NVMLLibraryMismatchError:
            self._missing_function(fn_name, what, gpu)
            return _NA_VALUE
        except Exception as err:  # a binding bug must not stop the watcher
            self.notify(
                f"NVML {fn_name} failed unexpectedly ({type(err).__name__}: {err}); {what} not available",
                key=f"unexpected:{fn_name}:{type(err).__name__}",
            )
            return _NA_VALUE

    def _missing_function(self, fn_name: str, what: str, gpu: _Gpu) -> None:
        self._missing.add(fn_name)
        if what not in ("compute", "graphics"):  # those fall back to the older call
            gpu.unsupported.add(what)
        name = "nvmlDeviceGetMemoryInfo_v2" if what == "memory_v2" else fn_name
        driver = f"driver {self.driver_version}" if self.driver_version else "the driver"
        self.notify(
            f"NVML driver/binding mismatch: {name} is missing from {driver}'s NVML "
            f"(nvidia-ml-py is newer); {_FALLBACK.get(name, what + ' not available')}",
            key=f"missing:{name}",
        )


_FALLBACK = {
    "nvmlDeviceGetComputeRunningProcesses": "using the older process list call",
    "nvmlDeviceGetGraphicsRunningProcesses": "using the older process list call",
    "nvmlDeviceGetMemoryInfo_v2": "memory info (v2) falls back to v1 (includes driver-reserved memory)",
    "nvmlDeviceGetCurrentClocksEventReasons": "using nvmlDeviceGetCurrentClocksThrottleReasons",
}



def _describe(err: BaseException) -> str:
    text = str(err).strip()
    return text or type(err).__name__


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
