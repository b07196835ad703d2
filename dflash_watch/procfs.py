"""Every read of Linux ``/proc`` in one place: alive, tree, groups, identity, environ, argv, cwd, exe.

Why one module: the job control, the GPU sampler and the fingerprint all
read the same files, and each copy parsed ``stat`` (whose command name may
hold spaces and parentheses) a little differently. Standard library only,
no psutil, and no imports from the rest of dflash-watch, so ``control/``,
``sources/`` and ``baseline/fingerprint/`` can all use it without pulling each other
in. A job's process tree is a few dozen processes and is read a few times a
second at most. A zombie counts as dead: it holds no memory and no GPU.

Readers never raise for a process that is gone or not ours to read: they
return None, an empty value or False, because a pid can exit between any
two reads. ``proc_dir`` (default ``/proc``) lets a test point the tree and
name readers at a fake directory.
"""

from __future__ import annotations

import os

PROC = "/proc"
SHELLS = frozenset({"bash", "zsh", "sh", "dash", "fish", "ksh", "tcsh", "csh", "mksh", "nu", "xonsh"})


def _stat(pid: int, proc_dir: str = PROC) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, session, tty, tpgid, ...]."""
    try:
        with open(f"{proc_dir}/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    return raw[raw.rfind(")") + 2:].split()


def _all_stats(proc_dir: str = PROC) -> dict[int, list[str]]:
    """The stat fields of every live process (zombies left out)."""
    out: dict[int, list[str]] = {}
    try:
        entries = os.listdir(proc_dir)
    except OSError:
        return out
    for entry in entries:
        if entry.isdigit():
            st = _stat(int(entry), proc_dir)
            if st and len(st) > 1 and st[0] not in ("Z", "X"):
                out[int(entry)] = st
    return out


def _boot_time() -> int | None:
    try:
        with open(f"{PROC}/stat", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def proc_alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and bool(st) and st[0] not in ("Z", "X")


def proc_name(pid: int, proc_dir: str = PROC) -> str:
    """The command name (``comm``) of PID, '' when it is gone or in another pid namespace."""
    try:
        with open(f"{proc_dir}/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def proc_ppid(pid: int) -> int | None:
    st = _stat(pid)
    try:
        return int(st[1]) if st else None
    except (IndexError, ValueError):
        return None


def proc_pgid(pid: int) -> int | None:
    st = _stat(pid)
    return int(st[2]) if st else None


def proc_foreground_pgid(pid: int) -> int | None:
    """The foreground process group of PID's terminal (tpgid), None without one."""
    st = _stat(pid)
    if not st or int(st[5]) <= 0:
        return None
    return int(st[5])


def proc_tree(root: int, proc_dir: str = PROC) -> tuple[int, ...]:
    """ROOT and all its live descendants, ROOT first (empty when ROOT is gone).

    One pass over /proc/*/stat builds the parent links: /proc may hold
    thousands of pids, so call this every few seconds, not per sample.
    """
    stats = _all_stats(proc_dir)
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
    btime = _boot_time()
    try:
        return None if btime is None else btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None


def proc_start_time(pid: int) -> float | None:
    st = _stat(pid)
    if not st:
        return None
    try:
        ticks = int(st[19])
    except (IndexError, ValueError):
        return None
    return proc_ticks_time(ticks)


def proc_uid(pid: int) -> int | None:
    """The owner of PID, None when it is gone."""
    try:
        return os.stat(f"{PROC}/{pid}").st_uid
    except OSError:
        return None


def proc_environ_entries(pid: int) -> list[bytes] | None:
    """PID's initial environment as raw ``KEY=VALUE`` entries; None when not ours to read.

    Raw bytes, so that a caller that keeps only some names (the fingerprint:
    the environment holds the job's secrets too) decodes nothing else.
    """
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw.split(b"\0")


def proc_environ(pid: int) -> dict[str, str]:
    """PID's initial environment ({} when not ours to read); undecodable bytes kept as surrogates."""
    out: dict[str, str] = {}
    for item in proc_environ_entries(pid) or ():
        key, sep, value = item.decode("utf-8", "surrogateescape").partition("=")
        if sep and key:
            out[key] = value
    return out


def proc_environ_has(pid: int, key: str, value: str) -> bool:
    """Whether PID's initial environment holds KEY=VALUE (False when not ours to read)."""
    want = f"{key}={value}".encode("utf-8", "surrogateescape")
    return want in (proc_environ_entries(pid) or ())


def proc_cmdline(pid: int) -> tuple[str, ...]:
    """The argv of PID ('' parts kept), empty when it is gone or not readable,
    and for a moment while it execs: the kernel names the process (``comm``)
    before it lays out the new argv, so a caller that waits for a name must
    not take an empty argv for the process's own."""
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as fh:
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
        return os.readlink(f"{PROC}/{pid}/cwd")
    except OSError:
        return None


def proc_exe(pid: int) -> str:
    """The executable of PID. Raises OSError (its reason is worth showing) when not readable."""
    return os.readlink(f"{PROC}/{pid}/exe")


def proc_maps(pid: int) -> list[str]:
    """The lines of PID's memory map (mapped files last on each line); [] when not readable."""
    try:
        with open(f"{PROC}/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            return fh.readlines()
    except OSError:
        return []


# -- signals: the readers above decide who; these only deliver ----------------

def signal_group(pgid: int, sig: int, members: tuple[int, ...] | list[int] | set[int]) -> set[int]:
    """Send SIG to process group PGID; return MEMBERS when it was delivered, else an empty set."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return set()
    return set(members)


def signal_pid(pid: int, sig: int) -> bool:
    """Send SIG to PID; whether it was delivered."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def proc_signal_groups(pgids: set[int], sig: int) -> set[int]:
    """Signal each group; return the pids that were in them."""
    hit: set[int] = set()
    for g in pgids:
        members = proc_group(g)
        if members:
            hit |= signal_group(g, sig, members)
    return hit


def proc_signal_pids(pids: set[int], sig: int) -> set[int]:
    """Signal each live pid; return those it reached."""
    return {pid for pid in pids if proc_alive(pid) and signal_pid(pid, sig)}


def proc_user(pid: int) -> str | None:
    """The user name owning PID (its uid when the name is unknown), None when it is gone.

    For the dashboard's process table: who holds memory on a GPU."""
    uid = proc_uid(pid)
    if uid is None:
        return None
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return str(uid)
