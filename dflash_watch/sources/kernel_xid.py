"""Xid errors from the kernel log (``NVRM: Xid (PCI:0000:3b:00): 79, ...``).

Where NVML's event set is unsupported (or misses one), the driver still
writes every Xid to the kernel ring buffer. Reading it is a bonus, never
required: ``/dev/kmsg`` is opened non-blocking and positioned at its end
(old Xids from before the watcher started are history, not news); when it
cannot be opened (``dmesg_restrict``, a container) the reader is simply off,
with no error. The line names the PCI bus id, which ``pci_key`` matches
against NVML's ``nvmlDeviceGetPciInfo().busId``.
"""

from __future__ import annotations

import errno
import os
import re

KMSG = "/dev/kmsg"
_MAX_RECORDS = 256  # per poll: a flood must not hold the sampler's tick

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
# Older drivers: "NVRM: Xid (0000:3b:00): 13, ..."
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)(?:\.[0-9a-fA-F]+)?\): (\d+)(.*)")

PciKey = tuple[int, int, int]  # (domain, bus, device)


def pci_key(bus_id: str | bytes) -> PciKey | None:
    """(domain, bus, device) of ``00000000:3B:00.0`` or ``0000:3b:00``."""
    text = bus_id.decode(errors="replace") if isinstance(bus_id, bytes) else bus_id
    parts = text.strip().split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
    except ValueError:
        return None


def parse_xid_line(text: str) -> tuple[PciKey, int, str] | None:
    """(PCI key, Xid code, the rest of the line) of one kernel line, or None."""
    if "NVRM: Xid" not in text:
        return None
    m = _XID.search(text)
    if m is None:
        return None
    key = (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16))
    return key, int(m.group(4)), m.group(5).lstrip(", ").strip()


class KernelXidReader:
    """Non-blocking reads of new kernel records; ``poll()`` never raises."""

    def __init__(self, path: str = KMSG) -> None:
        self.path = path
        self._fd: int | None = None
        self.readable = False
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return  # not permitted or absent: the reader is off, no error
        try:
            os.lseek(fd, 0, os.SEEK_END)  # /dev/kmsg: skip the records already there
        except OSError:
            pass  # a plain file (tests) or a kernel without seek: read from here
        self._fd = fd
        self.readable = True

    def poll(self) -> list[tuple[PciKey, int, str]]:
        """The Xid lines written since the last poll."""
        fd = self._fd
        if fd is None:
            return []
        out: list[tuple[PciKey, int, str]] = []
        for _ in range(_MAX_RECORDS):
            try:
                record = os.read(fd, 8192)  # /dev/kmsg: one record per read
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno == errno.EPIPE:  # records overwritten before we read them
                    continue
                self.close()
                break
            if not record:
                break
            for line in record.decode(errors="replace").splitlines():
                hit = parse_xid_line(line)
                if hit is not None:
                    out.append(hit)
        return out

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
