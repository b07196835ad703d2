"""Taking over a pane the user started by hand, once they confirmed (``Job.take_over``).

Apart from ``job.py`` because it is one action with its own checks: the
pane must still be the one surveyed, the training in it is stopped (the
user's shell is spared), and only a pane with nothing else left in it is
respawned, under the job's lock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..procfs import proc_alive, proc_tree
from .adopt import Adoption
from .errors import JobError
from .lock import JobLock
from .pane import Pane, chain
from .release import wait_released
from .state import JobState, pids_text
from .tmux import Tmux, TmuxError

if TYPE_CHECKING:
    from .job import Job, StepFn


def take_over(job: Job, adoption: Adoption, grace_s: float | None = None, command: str | None = None,
              on_step: StepFn | None = None) -> JobState:
    """Make the hand-started pane of ``adoption`` a managed job (after the user confirmed it).

    Under the job's lock: the pane must be the one surveyed; training
    processes still alive are stopped first (the user's shell is
    spared); then, only when nothing but the pane's own process is left,
    the pane is respawned (``respawn-pane -k`` ends the shell at its
    prompt) with the command and working directory, run by the wrapper.
    From then on ``job``'s spec holds that command and directory.
    """
    job._require()
    step = on_step or (lambda _m: None)
    text = (command if command is not None else adoption.command).strip()
    if not text:
        raise JobError(f"cannot tell what ran in pane {adoption.pane}: pass --cmd \"...\" to say it")
    with JobLock(job.spec.lock_path, timeout_s=job._lock_timeout_s):
        st = job.status()
        if st.pane != adoption.pane or st.managed:
            raise JobError(f"pane {adoption.pane} changed since it was checked ({st.line()}): nothing was touched")
        now = job._pane()
        if now is None or now.pid != adoption.pane_pid:
            raise JobError(f"pane {adoption.pane} now runs another process: nothing was touched")
        old = {p for p in st.pids if p != now.pid} if st.running else set()
        if st.running:
            st = job.abort(grace_s, step, asked="takeover")
            if st.running:
                raise JobError(f"could not stop the training in pane {adoption.pane}: {st.line()}")
        left = settled_leftovers(job, now)
        if left:
            raise JobError(f"pane {adoption.pane} still runs {pids_text(left)} besides its shell: "
                           "stop them first (nothing was respawned)")
        wait_released(old, job.gpu_holders, job.spec.gpus, job.spec.preflight_timeout_s, step, job._sleep)
        job.spec = replace(job.spec, command=text, cwd=adoption.cwd or job.spec.cwd,
                           env={**dict(adoption.env), **dict(job.spec.env)})
        cmd, opts = job._fresh_run()
        remain = ["set-option", "-w", "-t", job.spec.target, "remain-on-exit", "on"]
        kill = ["-k"] if not pane_dead(job.tmux, adoption.pane) else []
        job.tmux.run(*chain(remain, ["respawn-pane", *kill, "-t", adoption.pane, *opts, "--", *cmd]))
        step(f"took over pane {adoption.pane} in {job.spec.session}: {text}")
        job._foreground.pop(adoption.pane, None)
        return job._wait_started()


LEFTOVERS_SETTLE_S = 3.0  # a shell's prompt hook (pyenv, conda, direnv) after the Ctrl-C, gone within this


def settled_leftovers(job: Job, pane: Pane) -> tuple[int, ...]:
    """``pane_leftovers`` once the shell is back at its prompt: the processes
    its prompt hook starts as the training ends (``PROMPT_COMMAND``) are
    gone within ``LEFTOVERS_SETTLE_S``; a background job or an editor stays.
    Looked at once a tenth of a second: a takeover refused for a prompt
    hook had already stopped the training (one try in four)."""
    waited = 0.0
    while True:
        left = pane_leftovers(pane)
        if not left or waited >= LEFTOVERS_SETTLE_S:
            return left
        job._sleep(0.1)
        waited += 0.1


def pane_leftovers(pane: Pane) -> tuple[int, ...]:
    """Live processes in the pane other than its own (a shell's background jobs, an editor)."""
    if pane.dead:
        return ()
    return tuple(p for p in proc_tree(pane.pid) if p != pane.pid and proc_alive(p))


def pane_dead(tmux: Tmux, pane_id: str) -> bool:
    try:
        out = tmux.run("display-message", "-p", "-t", pane_id, "#{pane_dead}").stdout.strip()
    except TmuxError:
        return False
    return out == "1"
