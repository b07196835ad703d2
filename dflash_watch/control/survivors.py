"""Processes of a recorded run that are still alive, found by identity, never by pid alone.

Why: a training that ignores SIGHUP outlives a killed tmux server (and its
pane). The session then looks absent, and without this a ``start`` would
launch a second training next to the first. The run's record (written by
``wrapper.py``) holds the wrapper's pid, the training's pid and process
group, the session and each pid's start time in clock ticks since boot.

A pid only counts when its start ticks still match the record: a pid the
kernel handed to a new process since is somebody else's, and is never
named or signalled. Members of the group count when they are in the
recorded session and started no earlier than the training; a group whose
leader pid now belongs to another process is a recycled group and counts
for nothing. GPU holders (NVML, optional) count when their environment
carries the run's id (``RUN_ID_ENV``, set by the wrapper): that finds a
worker that left the group (``setsid``) and still holds a GPU.

Records written before start ticks were recorded (an upgrade under a
running job) are matched on start time within a few seconds of the
record's ``started_at``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..procfs import (
    proc_environ_has,
    proc_group_identities,
    proc_identity,
    proc_ticks_time,
    signal_group,
    signal_pid,
)
from .state import int_or_none, pids_text

RUN_ID_ENV = "DFLASH_WATCH_RUN_ID"
LEGACY_SLACK_S = 5.0  # start time vs the record's started_at, for records without start ticks

HolderRows = Callable[[], "list[tuple[int, int, int, str]]"]


@dataclass(frozen=True, slots=True)
class Survivors:
    """The live, verified processes of one recorded run.

    ``group`` is the process group that may be signalled as a whole (its
    leader is verified alive); None when only loose members are left.
    """

    run_id: str | None = None
    wrapper: int | None = None
    leader: int | None = None
    group: int | None = None
    members: tuple[int, ...] = ()
    strays: tuple[int, ...] = ()

    @property
    def pids(self) -> tuple[int, ...]:
        found = set(self.members) | set(self.strays)
        if self.wrapper is not None:
            found.add(self.wrapper)
        return tuple(sorted(found))

    @property
    def run_alive(self) -> bool:
        """The run itself lives on (its wrapper or its training), not just leftovers of it."""
        return self.wrapper is not None or self.leader is not None

    def __bool__(self) -> bool:
        return bool(self.pids)


def _matches(pid: int, ticks: int | None, started_at: float | None) -> bool:
    ident = proc_identity(pid)
    if ident is None:
        return False
    if ticks is not None:
        return ident[0] == ticks
    if started_at is None:
        return False
    when = proc_ticks_time(ident[0])
    return when is not None and abs(when - started_at) <= LEGACY_SLACK_S


def find(rec: dict | None, gpu_holders: HolderRows | None = None, exclude: Iterable[int] = ()) -> Survivors:
    """The verified survivors of the run ``rec`` describes (empty when it has ended cleanly)."""
    if not rec:
        return Survivors()
    skip = set(exclude)
    started_at = rec.get("started_at") if isinstance(rec.get("started_at"), (int, float)) else None
    run_id = str(rec.get("run_id") or "") or None
    wrapper_pid, pid, pgid = (int_or_none(rec.get(k)) for k in ("wrapper_pid", "pid", "pgid"))
    w_ticks, p_ticks, sid = (int_or_none(rec.get(k)) for k in ("wrapper_start", "pid_start", "sid"))
    # A wrapper that wrote how its run ended is past it: it only exits
    # (its interpreter shutting down). tmux may already call the pane dead
    # then (the pty closed before the process is gone), and counting the
    # wrapper made a crashed run read as "exited, code 3; still alive: its
    # wrapper" (a test under load, once). The run's own processes still
    # count: a training that outlived its wrapper's wait is found below.
    ended = rec.get("state") in ("exited", "killed")
    wrapper = wrapper_pid if wrapper_pid and not ended and wrapper_pid not in skip and _matches(
        wrapper_pid, w_ticks, started_at) else None
    leader = pid if pid and _matches(pid, p_ticks, started_at) else None
    members: list[int] = []
    group = None
    if pgid:
        recycled = pgid == pid and leader is None and proc_identity(pgid) is not None
        if not recycled:
            floor = p_ticks
            for member, (ticks, member_sid) in proc_group_identities(pgid).items():
                if member in skip or (sid is not None and member_sid != sid):
                    continue
                if floor is not None and ticks < floor:
                    continue
                if floor is None and not _after(ticks, started_at):
                    continue
                members.append(member)
            group = pgid if leader is not None and pgid == pid else None
    strays = _gpu_strays(gpu_holders, run_id, set(members) | skip | {wrapper_pid or -1}, p_ticks)
    return Survivors(run_id, wrapper, leader, group, tuple(sorted(members)), strays)


def _after(ticks: int, started_at: float | None) -> bool:
    when = proc_ticks_time(ticks)
    return started_at is not None and when is not None and when >= started_at - LEGACY_SLACK_S


def _gpu_strays(gpu_holders: HolderRows | None, run_id: str | None, known: set[int],
                floor: int | None) -> tuple[int, ...]:
    """GPU holders outside the group whose environment names this run."""
    if gpu_holders is None or not run_id:
        return ()
    try:
        rows = list(gpu_holders())
    except Exception:  # a broken GPU source must not break control  # noqa: BLE001
        return ()
    out = set()
    for row in rows:
        pid = int(row[1])
        if pid in known:
            continue
        ident = proc_identity(pid)
        if ident is None or (floor is not None and ident[0] < floor):
            continue
        if proc_environ_has(pid, RUN_ID_ENV, run_id):
            out.add(pid)
    return tuple(sorted(out))


def signal_survivors(s: Survivors, sig: int) -> set[int]:
    """Send ``sig`` to the verified survivors; return the pids it reached.

    The group as a whole only while its leader is verified (a fork racing the
    signal is still in it); loose members and strays one by one. The wrapper
    is signalled only once nothing else is left: it must live to record how
    its training ended, and it exits by itself after.
    """
    hit = signal_group(s.group, sig, s.members) if s.group is not None else set()
    loose = [p for p in (*s.members, *s.strays) if p not in hit]
    if not loose and not hit and s.wrapper is not None:
        loose = [s.wrapper]
    hit.update(pid for pid in loose if signal_pid(pid, sig))
    return hit


def survivors_text(surv: Survivors) -> str:
    """How a status line names a run's survivors."""
    if surv.run_alive:
        return f"the last run still runs outside tmux: {pids_text(surv.pids)} (dflash-watch abort ends it)"
    return f"processes of the last run still alive: {pids_text(surv.pids)}"


__all__ = ["RUN_ID_ENV", "Survivors", "find", "signal_survivors", "survivors_text"]
