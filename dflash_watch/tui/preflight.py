"""What a relaunch would do, shown before anything is killed.

Aborting a healthy-looking week-long run is expensive, and a relaunch that
kills the job and then cannot start it (no command configured, someone
else's process still on the GPUs) is worse. So `r` first gathers the facts
(the job's state from tmux, the processes on its GPUs from the Monitor's
latest samples) and the dashboard shows them: a blocker stops the action
outright, a warning goes into the confirmation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text

from .reading import gpu_holders, locked
from .text import fmt_gib, plain

if TYPE_CHECKING:
    from ..monitor import Monitor


@dataclass(frozen=True, slots=True)
class Holder:
    gpu: int
    pid: int
    used_bytes: int
    name: str


@dataclass(frozen=True, slots=True)
class Preflight:
    state: Any  # JobState
    command: str
    will_stop: tuple[int, ...]
    job_gpus: tuple[int, ...]
    foreign: tuple[Holder, ...]
    blockers: tuple[str, ...]
    gpus_configured: bool = False
    unlisted: tuple[int, ...] = ()  # GPUs whose processes the sampler could not list
    sampled: bool = True  # any GPU sample at all (no NVML, no --gpu-samples: nothing is known)

    @property
    def alive(self) -> bool:
        """Running, or a run that survived outside tmux (the tmux server
        died under it; ``JobState.pids`` of a stopped job are verified
        survivors): either way there is something to stop."""
        return bool(getattr(self.state, "running", False)) or bool(self.will_stop)

    @property
    def outside(self) -> bool:
        """The last run lives on outside tmux (its server died under it): a
        relaunch refuses that (two trainings), an abort ends it."""
        return not getattr(self.state, "running", False) and bool(self.will_stop)

    @property
    def ok(self) -> bool:
        return not self.blockers

    def text(self) -> Text:
        out = Text()
        line = self.state.line() if hasattr(self.state, "line") else str(self.state)
        out.append("job       ", style="bold")
        out.append(plain(line) + "\n")
        out.append("command   ", style="bold")
        out.append((plain(self.command) or "(none configured)") + "\n", style="" if self.command else "red")
        if self.alive:
            pids = ", ".join(map(str, self.will_stop[:16])) + (" …" if len(self.will_stop) > 16 else "")
            out.append("will stop ", style="bold")
            out.append(f"{len(self.will_stop)} processes ({pids}): Ctrl-C, then SIGTERM, then SIGKILL\n")
        gpus = (", ".join(map(str, self.job_gpus)) if self.job_gpus
                else "unknown (none of its processes on a GPU now)" if self.sampled else "unknown (no GPU samples)")
        out.append("GPUs      ", style="bold")
        out.append(gpus + "\n")
        if self.foreign:
            out.append("others    ", style="bold yellow")
            held = "; ".join(f"pid {h.pid} {plain(h.name or '?')} on GPU {h.gpu} ({fmt_gib(h.used_bytes)} GiB)"
                             for h in self.foreign[:6])
            if len(self.foreign) > 6:
                held += f"; {len(self.foreign) - 6} more"
            if self.gpus_configured:
                out.append(f"{held}: the relaunch waits for them to exit, then refuses\n", style="yellow")
            else:
                out.append(f"{held}: not the job's; they keep their memory across the relaunch\n", style="yellow")
        elif not self.sampled:
            out.append("others    ", style="bold yellow")
            out.append("not known: no GPU samples to read\n", style="yellow")
        elif not self.unlisted:
            out.append("others    ", style="bold")
            out.append("none seen on the job's GPUs\n" if self.job_gpus else "none seen on any GPU\n", style="green")
        if self.unlisted:
            out.append("others    ", style="bold yellow")
            out.append(f"not available on GPU {', '.join(map(str, self.unlisted))} (the sampler cannot list "
                       "processes there)\n", style="yellow")
        for blocker in self.blockers:
            out.append("blocked   ", style="bold red")
            out.append(blocker + "\n", style="red")
        out.rstrip()
        return out


def preflight(job: Any, state: Any, monitor: Monitor) -> Preflight:
    """Facts for a relaunch decision. ``state`` is a fresh ``job.status()``."""
    spec = getattr(job, "spec", None)
    command = (getattr(spec, "command", "") or "").strip()
    pids = frozenset(getattr(state, "pids", ()) or ())
    configured = getattr(spec, "gpus", None)
    blockers: list[str] = []
    if not command:
        blockers.append("no run command configured: set [run] command in the config or pass --cmd")
    with locked(monitor):  # what the GPU tiles show: their samples, their job pids
        holders = gpu_holders(monitor, pids)
    seen_job = {gpu for gpu, split in holders.items() if split is not None and split[0]}
    unlisted = tuple(gpu for gpu, split in holders.items() if split is None)
    job_gpus = tuple(configured) if configured is not None else tuple(sorted(seen_job))
    # Before the job's processes show (a crashed or stopped job holds no GPU)
    # its GPUs are unknown: then every holder the tiles show is named.
    known = bool(job_gpus)
    foreign = tuple(Holder(gpu, p.pid, p.used_bytes, p.name)
                    for gpu, split in sorted(holders.items()) if split is not None
                    for p in split[1] if not known or gpu in job_gpus)
    unlisted = tuple(gpu for gpu in unlisted if not known or gpu in job_gpus)
    return Preflight(
        state=state,
        command=command,
        will_stop=tuple(sorted(pids)),
        job_gpus=job_gpus,
        foreign=foreign,
        blockers=tuple(blockers),
        gpus_configured=configured is not None,
        unlisted=unlisted,
        sampled=bool(holders),
    )
