"""Who holds GPU memory, one row per process and GPU (nvitop's table, in short).

From the latest sample of each GPU: pid, user, memory, command. A
process that is not the job's is marked (someone else's 20 GiB is a
different problem from a leak), and so is a leftover: the job has exited
but one of its pids still holds memory, which is what makes the relaunch
fail with out-of-memory. User and command come from /proc (``procfs``)
once per pid, through ``describe`` so that tests and scenes can stand in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ..reading import job_pids, locked
from ..text import fmt_gib, plain, set_static

if TYPE_CHECKING:
    from ...monitor import Monitor

Describe = Callable[[int], "tuple[str | None, str | None]"]
MAX_ROWS = 8


def describe_pid(pid: int) -> tuple[str | None, str | None]:
    """(user, command line) of a pid of this machine, from /proc; None where unreadable."""
    from ... import procfs

    argv = procfs.proc_cmdline(pid)
    return procfs.proc_user(pid), " ".join(argv) if argv else None


@dataclass(frozen=True, slots=True)
class HolderRow:
    """One process and what it holds over all GPUs (a rank's process may hold several)."""

    gpus: tuple[int, ...]
    pid: int
    used_bytes: int
    name: str
    job: bool  # the job's (flagged by the sampler, or a pid of its process tree)
    leftover: bool  # the job's, still holding memory after the job exited


def holder_rows(monitor: Monitor, known_job: set[int] | None = None) -> list[HolderRow]:
    """Every process of the GPUs' latest samples, one row per pid. Call under ``locked``.

    ``known_job``: pids seen as the job's before (updated here). Once the
    job has exited, neither its process tree nor the sampler's flag names
    its pids any more; a pid that was the job's and still holds memory is
    the leftover that makes the relaunch run out of memory.
    """
    pids = job_pids(monitor) | frozenset(known_job or ())
    exited = monitor.last_exit is not None and getattr(monitor.job_state, "state", "exited") != "running"
    exit_time = monitor.last_exit.time if monitor.last_exit is not None else None
    rows: dict[int, HolderRow] = {}
    history = monitor.gpus
    for gpu in history.gpus:
        last = history.last(gpu)
        if last is None or not last.processes:
            continue
        late = exit_time is not None and last.time > exit_time
        for p in last.processes:
            job = p.job or p.pid in pids
            if job and known_job is not None and not exited:
                if len(known_job) >= 4096:
                    known_job.clear()
                known_job.add(p.pid)
            row = HolderRow((gpu,), p.pid, p.used_bytes, p.name, job, job and exited and late)
            seen = rows.get(p.pid)
            if seen is not None:
                row = HolderRow(seen.gpus + (gpu,), p.pid, seen.used_bytes + p.used_bytes, seen.name or p.name,
                                seen.job or job, seen.leftover or row.leftover)
            rows[p.pid] = row
    # The holders that are not the job's first: they are why the table is worth a look.
    return sorted(rows.values(), key=lambda r: (not r.leftover, r.job, r.gpus, r.pid))


def gpu_list(gpus: tuple[int, ...]) -> str:
    """``0-4``, ``3``, ``0,2,5``: the GPUs of one process, short."""
    if len(gpus) > 2 and list(gpus) == list(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(map(str, gpus))


def holders_table(rows: list[HolderRow], describe: Describe, cache: dict[int, tuple[str | None, str | None]]) -> Table:
    table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="bold")
    table.add_column("gpu", justify="right", no_wrap=True)
    table.add_column("pid", justify="right", no_wrap=True)
    table.add_column("user", no_wrap=True, max_width=10)
    table.add_column("mem", justify="right", no_wrap=True)
    table.add_column("command", no_wrap=True, overflow="ellipsis", ratio=1)
    table.add_column("", no_wrap=True)
    for row in rows[:MAX_ROWS]:
        if row.pid not in cache:
            if len(cache) >= 4096:  # pids of a week of relaunches: start afresh rather than grow
                cache.clear()
            cache[row.pid] = describe(row.pid)
        user, command = cache[row.pid]
        mark = (Text("LEFTOVER", style="bold white on red") if row.leftover
                else Text("job", style="green") if row.job else Text("not job", style="bold magenta"))
        table.add_row(gpu_list(row.gpus), str(row.pid), plain(user or "-"), f"{fmt_gib(row.used_bytes)}G",
                      Text(plain(command or row.name or "-")), mark,
                      style="" if row.job and not row.leftover else "magenta" if not row.job else "red")
    if len(rows) > MAX_ROWS:
        table.add_row("", "", "", "", Text(f"... {len(rows) - MAX_ROWS} more", style="dim"), "")
    return table


class ProcessPanel(Static):
    DEFAULT_CSS = """
    ProcessPanel { border: round $panel-lighten-2; padding: 0 1; height: auto; max-height: 12; display: none; }
    ProcessPanel.-shown { display: block; }
    """

    def __init__(self, *, describe: Describe | None = None, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.describe = describe or describe_pid
        self.border_title = "GPU processes"
        self.rows: list[HolderRow] = []  # shown last (tests read them)
        self.wanted = False  # the user asked for it (the processes key)
        self._cache: dict[int, tuple[str | None, str | None]] = {}
        self._job_pids: set[int] = set()  # pids seen as the job's (``holder_rows``)
        self._key: tuple | None = None

    def update_view(self, monitor: Monitor, beside_ranks: bool) -> None:
        """Shown when asked for, beside the ranks panel, or while a leftover holds memory."""
        with locked(monitor):
            rows = holder_rows(monitor, self._job_pids)
        leftovers = any(r.leftover for r in rows)
        self.rows = rows
        self.set_class(bool(rows) and (self.wanted or beside_ranks or leftovers), "-shown")
        self.set_class(leftovers, "-alerting")
        key = tuple(rows)
        if key == self._key:
            return
        self._key = key
        foreign = sum(not r.job for r in rows)
        title = Text("GPU processes")
        if leftovers:
            title.append("  leftover after exit ", style="bold white on red")
        elif foreign:
            title.append(f"  {foreign} not the job's", style="magenta")
        self.border_title = title
        set_static(self, holders_table(rows, self.describe, self._cache), layout=True)


__all__ = ["HolderRow", "ProcessPanel", "describe_pid", "holder_rows"]
