"""What the common NVIDIA Xid codes mean, for ``gpu_health/xid`` alerts.

Written from NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) in our
own words, and kept to the codes a training run meets. ``critical`` says
whether the GPU itself (or everything on it) is in trouble and someone
should act now; the others are usually the application's own fault (an
illegal address, a killed context) and are warnings: worth a look, and
often the shadow of a crash the ``crash`` detector already reported.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class XidCode:
    code: int
    meaning: str
    critical: bool


_TABLE = (
    XidCode(13, "graphics engine exception (often an illegal access in a kernel: an application bug)", False),
    XidCode(31, "GPU memory page fault (MMU fault: usually an illegal address in the application)", False),
    XidCode(43, "GPU stopped processing: a channel was reset after an application fault", False),
    XidCode(45, "preemptive cleanup: the driver tore down a context after an earlier error or a kill", False),
    XidCode(48, "double-bit (uncorrectable) ECC error in GPU memory", True),
    XidCode(61, "internal micro-controller breakpoint/warning (PMU): the GPU may need a reset", True),
    XidCode(62, "internal micro-controller halt (PMU): the GPU needs a reset", True),
    XidCode(63, "ECC page retirement or row remap recorded: reset the GPU to apply it", False),
    XidCode(64, "ECC page retirement or row remap recording FAILED: the memory cannot be repaired", True),
    XidCode(68, "video/decoder engine exception (NVDEC)", False),
    XidCode(69, "graphics engine class error", False),
    XidCode(74, "NVLink error: a link between GPUs failed or retrained", True),
    XidCode(79, "GPU has fallen off the bus: it is gone until a reset or reboot", True),
    XidCode(92, "high single-bit ECC error rate", False),
    XidCode(94, "contained ECC error: the application on that memory was stopped; the GPU is usable", True),
    XidCode(95, "uncontained ECC error: every application on the GPU is affected; reset required", True),
    XidCode(119, "GSP RPC timeout: the GPU's system processor stopped answering; reset required", True),
    XidCode(120, "GSP error: the GPU's system processor failed; reset required", True),
)

XID_CODES: dict[int, XidCode] = {x.code: x for x in _TABLE}


def describe_xid(code: int) -> XidCode:
    """The table's entry, or an "unknown" one (a warning) for other codes."""
    known = XID_CODES.get(code)
    if known is not None:
        return known
    return XidCode(code, "Xid not in our table: see NVIDIA's Xid catalog", False)
