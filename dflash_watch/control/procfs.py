"""The job's processes as Linux ``/proc`` shows them: alive, tree, groups, signals.

Linux only, standard library only (no psutil): the job's process tree is a
few dozen processes and is read a few times a second at most. A zombie
counts as dead: it holds no memory and no GPU.
"""

from __future__ import annotations

import os

SHELLS = frozenset({"bash", "zsh", "sh", "dash", "fish", "ksh", "tcsh", "csh", "mksh", "nu", "xonsh"})

def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, session, tty, tpgid, ...]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def _all_stats() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st and st[0] not in ("Z", "X"):
                out[int(entry)] = st
    return out


def proc_alive(pid: int) -> bool:
    st = _stat(pid)
    return bool(st) and st[0] not in ("Z", "X")


def proc_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def proc_pgid(pid: int) -> int | None:
    st = _stat(pid)
    return int(st[2]) if st else None


def proc_foreground_pgid(pid: int) -> int | None:
    """The foreground process group of PID's terminal (tpgid), None without one."""
    st = _stat(pid)
    if not st or int(st[5]) <= 0:
        return None
    return int(st[5])


def proc_tree(root: int) -> tuple[int, ...]:
    """ROOT and all its live descendants, ROOT first."""
    stats = _all_stats()
    children: dict[int, list[int]] = {}
    for pid, st in stats.items():
        children.setdefault(int(st[1]), []).append(pid)
    if root not in stats:
        return ()
    out, todo = [root], [root]
    while todo:
        for child in sorted(children.get(todo.pop(), ())):
            out.append(child)
            todo.append(child)
    return tuple(out)


def proc_group(pgid: int) -> tuple[int, ...]:
    """Live members of process group PGID."""
    return tuple(sorted(pid for pid, st in _all_stats().items() if int(st[2]) == pgid))


def proc_group_identities(pgid: int) -> dict[int, tuple[int, int]]:
    """Live members of process group PGID as {pid: (start ticks, session)}."""
    out: dict[int, tuple[int, int]] = {}
    for pid, st in _all_stats().items():
        if int(st[2]) == pgid:
            try:
                out[pid] = (int(st[19]), int(st[3]))
            except (IndexError, ValueError):
                continue
    return out


def proc_start_time(pid: int) -> float | None:
    st = _stat(pid)
    if not st:
        return None
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        return btime + int(st[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def proc_signal_groups(pgids: set[int], sig: int) -> set[int]:
    """Signal each group; return the pids that were in them."""
    hit: set[int] = set()
    for g in pgids:
        members = proc_group(g)
        if not members:
            continue
        try:
            os.killpg(g, sig)
            hit.update(members)
        except (ProcessLookupError, PermissionError):
            pass
    return hit


def proc_signal_pids(pids: set[int], sig: int) -> set[int]:
    hit: set[int] = set()
    for pid in pids:
        if proc_alive(pid):
            try:
                os.kill(pid, sig)
                hit.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return hit


def proc_identity(pid: int) -> tuple[int, int, int] | None:
    """(start time in clock ticks since boot, process group, session) of a live PID, else None.

    The start ticks are what tell a process from a later one that got its
    pid: the pair (pid, start ticks) is unique for the life of the machine.
    """
    st = _stat(pid)
    if not st or st[0] in ("Z", "X"):
        return None
    try:
        return int(st[19]), int(st[2]), int(st[3])
    except (IndexError, ValueError):
        return None


def proc_ticks_time(ticks: int) -> float | None:
    """Start ticks as seconds since the epoch (for records that predate start ticks)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def proc_environ_has(pid: int, key: str, value: str) -> bool:
    """Whether PID's initial environment holds KEY=VALUE (False when not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return False
    want = f"{key}={value}".encode("utf-8", "surrogateescape")
    return want in raw.split(b"\0")


def proc_cmdline(pid: int) -> tuple[str, ...]:
    """The argv of PID ('' parts kept), empty when it is gone or not readable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return ()
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return tuple(p.decode("utf-8", "surrogateescape") for p in parts)


def proc_cwd(pid: int) -> str | None:
    """The working directory of PID, None when it is gone or not ours to read."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
