"""The tmux-managed training job: start, status, abort, relaunch, takeover, exit events.

Why this shape:
- The job lives in a tmux pane, not in dflash-watch: quitting or killing the
  dashboard never touches it (nothing here registers atexit or signal
  handlers), and the user can attach to it as usual.
- The pane runs ``wrapper.py`` (the protocol: ``record.py``), which records
  the exit code and signal in a state file; tmux's own dead-pane status is
  only a fallback.
- Start and relaunch run under an flock and re-check the job under it, and
  a dflash-watch pane is respawned without ``-k`` (tmux refuses to respawn
  a live pane), so concurrent callers cannot end up with two trainings.
  ``-k`` is used only by :meth:`Job.take_over`, to replace the user's shell
  at its prompt once the training in it is dead, after the user confirmed.
- A run that outlived its tmux server (it ignores SIGHUP) is found from its
  record by identity (``survivors.py``): start and relaunch refuse while it
  lives, and abort ends it.
- An abort leaves a note beside the record before its first signal
  (``record.write_asked``): the exit is then ``aborted`` (asked for), not
  ``killed``. The training inherits none of the watcher's alert secrets
  (``secrets.py``).
- The parts live by concept: the spec (``spec.py``), the state and its
  words (``state.py``), exit events (``exits.py``), abort escalation
  (``abort.py``), the relaunch preflight (``release.py``), the pane
  (``pane.py``), pane adoption (``adopt.py``), /proc (``dflash_watch/procfs.py``). The
  names stay importable from here.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from dflash_watch.parsers.events import ProcessExit

from ..procfs import (
    SHELLS,
    proc_alive,
    proc_foreground_pgid,
    proc_group,
    proc_name,
    proc_pgid,
    proc_signal_groups,
    proc_signal_pids,
    proc_start_time,
    proc_tree,
)
from .abort import end_survivors, escalate, keeper
from .adopt import Adoption, Foreground, read_foreground, survey
from .errors import (
    AlreadyRunning,
    ControlUnavailable,
    HandStarted,
    JobError,
    RelaunchRefused,
    SurvivorsAlive,
)
from .exits import OUTSIDE_SIGNALS, ExitWatcher, SignatureSource, classify_exit
from .lock import JobLock
from .pane import Pane, active_pane, chain
from .record import (
    WRAPPER_PATH,
    asked_path,
    is_ours,
    launch_argv,
    outcome_text,
    read_asked,
    read_record,
    write_asked,
)
from .release import GpuHolders, wait_released
from .secrets import clean_environ, secret_names
from .spec import JobSpec, default_state_dir
from .state import JobState, incarnation, int_or_none
from .survivors import Survivors, survivors_text
from .survivors import find as find_survivors
from .tmux import Tmux, TmuxError, TmuxMissing, TmuxServerGone, escape_format

STATES = ("running", "exited", "killed", "absent")
StepFn = Callable[[str], None]
_FOREGROUND_KEEP = 16  # panes whose last foreground job is remembered


class Job:
    """Control of one job. Thread-compatible: concurrent calls from several
    threads or processes are serialised by the job's lock file."""

    def __init__(
        self,
        spec: JobSpec,
        tmux: Tmux | None = None,
        gpu_holders: GpuHolders | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        lock_timeout_s: float = 300.0,
    ) -> None:
        self.spec = spec
        # Without the alert secrets: a tmux server this starts holds none of them.
        self.tmux = tmux or Tmux(socket=spec.socket,
                                 env=clean_environ(spec.secret_env) if spec.secret_env else None)
        self.gpu_holders = gpu_holders
        self._clock = clock
        self._sleep = sleep
        self._lock_timeout_s = lock_timeout_s
        self._exits = ExitWatcher()
        # The last foreground job seen in a pane the user started by hand,
        # per pane: what a takeover runs again once that job has died.
        self._foreground: dict[str, Foreground] = {}

    # ----------------------------------------------------------------- basics
    @property
    def available(self) -> bool:
        return self.tmux.available

    def _require(self) -> None:
        try:
            self.tmux.resolve_binary()
        except TmuxMissing as exc:
            raise ControlUnavailable(str(exc)) from exc

    def _record(self) -> dict | None:
        return read_record(self.spec.state_path)

    def _pane(self) -> Pane | None:
        """The active pane of the job's window, None if the window is gone."""
        return active_pane(self.tmux, self.spec.target)

    # ----------------------------------------------------------------- status
    def status(self) -> JobState:
        self._require()
        now = self._clock()
        try:
            pane = self._pane()
            gone = f"session {self.spec.session} not found"
        except TmuxServerGone:
            pane, gone = None, "tmux server not running"
        # The record after the pane: a pane seen dead was the wrapper's
        # end, and the wrapper writes its record before it ends.
        rec = self._record()
        if pane is None:
            surv = self.survivors(rec)
            msg = gone
            if rec and rec.get("state") in ("exited", "killed"):
                msg += f"; last run {outcome_text(rec)}"
            if surv:
                msg += f"; {survivors_text(surv)}"
            return JobState("absent", self.spec.session, code=int_or_none(rec and rec.get("code")),
                            signal=int_or_none(rec and rec.get("signal")), pids=surv.pids, message=msg,
                            run_id=rec.get("run_id") if rec else None, asked=(rec or {}).get("asked"))
        ours = is_ours(rec, pane.pid)
        mine = rec or {}  # ours implies rec is this (non-empty) dict
        run_id = mine.get("run_id") if ours else f"pane:{pane.pane_id}:{pane.pid}"
        if not pane.dead:
            tree = proc_tree(pane.pid)
            if not ours and proc_name(pane.pid) in SHELLS:
                fg = proc_foreground_pgid(pane.pid)
                if fg in (pane.pid, None):
                    return JobState("exited", self.spec.session, pid=pane.pid, pane=pane.pane_id,
                                    message="pane is at an interactive shell prompt (exit status unknown)")
                self._remember_foreground(pane, fg)
                run_id = f"{run_id}:{fg}"  # one incarnation per foreground job of the shell
            started = mine.get("started_at") if ours else proc_start_time(pane.pid)
            return JobState("running", self.spec.session, pid=pane.pid, pids=tree, started_at=started,
                            uptime_s=None if started is None else max(0.0, now - started),
                            pane=pane.pane_id, run_id=run_id)
        if ours and mine.get("state") in ("exited", "killed"):
            code, sig, msg = int_or_none(mine.get("code")), int_or_none(mine.get("signal")), str(mine.get("message") or "")
        else:
            code, sig = pane.dead_status, pane.dead_signal
            msg = "" if (code is not None or sig is not None) else "tmux reported no exit status"
            if ours:
                msg = "wrapper ended without recording (killed?)" + (f"; {msg}" if msg else "")
        surv = find_survivors(rec, self.gpu_holders) if ours else Survivors()
        if surv:
            msg = (msg + "; " if msg else "") + survivors_text(surv)
        return JobState("killed" if sig else "exited", self.spec.session, code=code, signal=sig, pid=pane.pid,
                        pids=surv.pids, started_at=mine.get("started_at") if ours else None, message=msg,
                        pane=pane.pane_id, run_id=run_id, asked=mine.get("asked") if ours else None)

    def _remember_foreground(self, pane: Pane, fg: int) -> None:
        """Read the user's foreground job once per process group (cheap: a few /proc files)."""
        known = self._foreground.get(pane.pane_id)
        if known is not None and known.pgid == fg:
            return
        seen = read_foreground(pane.pid)
        if seen is None:
            return
        self._foreground[pane.pane_id] = seen
        while len(self._foreground) > _FOREGROUND_KEEP:
            self._foreground.pop(next(iter(self._foreground)))

    def survivors(self, rec: dict | None = None) -> Survivors:
        """Verified live processes of the recorded run (see ``survivors.py``), GPU holders included."""
        return find_survivors(rec if rec is not None else self._record(), self.gpu_holders)

    # -------------------------------------------------------------- exit event
    def poll_exit(self, now: float, signature: SignatureSource = None) -> ProcessExit | None:
        """A ProcessExit the first time this run incarnation is seen ended, else None.

        Never raises: it is the Monitor's per-tick hook and must not break
        monitoring (tmux missing or gone just means nothing to report).
        ``signature`` is the last crash signature seen in the log (or its
        function, ``exits.SignatureSource``).
        """
        try:
            st = self.status()
        except (ControlUnavailable, TmuxError, OSError):
            return None
        return self._exits.see(st, self._record() if not st.running else None, now, signature,
                               asked=self._asked_for)

    def _asked_for(self, run_id: str) -> str | None:
        """The action that asked run ``run_id`` to end (this process's, or any caller's note)."""
        return self._exits.asked.get(run_id) or read_asked(self.spec.state_path, run_id)

    # ------------------------------------------------------------------ start
    def start(self, on_step: StepFn | None = None) -> JobState:
        """Start the job (create the session/window, or respawn its dead pane)."""
        self._require()
        self._need_command()
        step = on_step or (lambda _m: None)
        with JobLock(self.spec.lock_path, timeout_s=self._lock_timeout_s):
            st = self.status()
            if st.running:
                raise AlreadyRunning(st)
            surv = self.survivors()
            if surv:
                raise SurvivorsAlive("start", surv.pids, surv.run_alive)
            self._launch(step)
            return self._wait_started()

    def _need_command(self) -> None:
        if not self.spec.command.strip():
            raise JobError("no run command configured: set [run] command in the config or pass --cmd")

    def _fresh_run(self) -> tuple[list[str], list[str]]:
        """(wrapper argv, tmux -c/-e options) of a new run incarnation; clears the old record."""
        spec = self.spec
        self._need_command()
        fresh = spec.fresh_state_path
        fresh.parent.mkdir(parents=True, exist_ok=True)
        for old in {spec.state_path, fresh}:  # the record of the name before the hash too
            old.unlink(missing_ok=True)
            asked_path(old).unlink(missing_ok=True)
        unset = secret_names(spec.secret_env, os.environ) if spec.secret_env else ()
        argv = launch_argv(fresh, uuid.uuid4().hex, spec.command, unset)
        opts: list[str] = []
        if spec.cwd:
            opts += ["-c", escape_format(os.path.abspath(os.path.expanduser(spec.cwd)))]
        for key, value in spec.env.items():
            opts += ["-e", f"{key}={value}"]
        return argv, opts

    def _launch(self, step: StepFn) -> None:
        """Launch under the lock. remain-on-exit is set in the same tmux call."""
        spec = self.spec
        if spec.cwd is not None and not Path(str(spec.cwd)).expanduser().is_dir():
            # tmux would run the job in the caller's directory instead, where
            # its relative paths (data, checkpoints) mean something else.
            raise JobError(f"working directory {spec.cwd}: no such directory; nothing was started")
        cmd, opts = self._fresh_run()
        remain = ["set-option", "-w", "-t", spec.target, "remain-on-exit", "on"]
        try:
            pane = self._pane()
        except TmuxServerGone:
            pane = None
        if pane is not None:
            if not pane.dead:
                raise JobError(f"pane {pane.pane_id} of {spec.session} is alive (pid {pane.pid}); "
                               "dflash-watch only respawns dead panes")
            self.tmux.run(*chain(remain, ["respawn-pane", "-t", pane.pane_id, *opts, "--", *cmd]))
            step(f"respawned pane {pane.pane_id} in {spec.session}")
        elif spec.window and self.tmux.has_session(spec.session):
            self.tmux.run(*chain(["new-window", "-d", "-t", f"={spec.session}:", "-n", spec.window, *opts,
                                  "--", *cmd], remain))
            step(f"created window {spec.window} in {spec.session}")
        else:
            name = ["-n", spec.window] if spec.window else []
            self.tmux.run(*chain(["new-session", "-d", "-s", spec.session, *name, *opts, "--", *cmd], remain))
            step(f"created session {spec.session}")

    def _wait_started(self, timeout_s: float = 5.0) -> JobState:
        """Wait until the wrapper has recorded its child (or the pane died)."""
        deadline = time.monotonic() + timeout_s
        while True:
            # The record first: read after the status, a record the wrapper
            # wrote between the two returned a status from before it (a run
            # "found in the pane", not the managed one just started).
            rec = self._record()
            st = self.status()
            if not st.running or (rec and rec.get("state") != "starting") or time.monotonic() >= deadline:
                return st
            time.sleep(0.02)

    # ------------------------------------------------------------------ abort
    def abort_steps(self, grace_s: float | None = None, asked: str = "abort") -> Iterator[str]:
        """Ctrl-C, wait, SIGTERM the process groups, wait, SIGKILL; yields one message per step.

        A run that outlived its tmux server gets the same escalation (SIGINT
        in place of Ctrl-C), to its verified processes only. ``asked`` names
        the action (abort, relaunch) the exit is then reported as.
        """
        self._require()
        grace = self.spec.grace_s if grace_s is None else grace_s
        st = self.status()
        rec = self._record()
        if not st.running:
            surv = self.survivors(rec)
            if not surv:
                yield f"not running ({st.line()})"
                return
            self._note_asked(surv.run_id, asked)
            yield from end_survivors(surv, lambda: self.survivors(rec), grace, self._wait)
            return
        self._note_asked(st.run_id, asked)
        yield from escalate(self.tmux, st, rec, grace, self._wait, self.spec.target)
        rest = self.survivors(rec) if is_ours(rec, st.pid) else Survivors()
        if rest:  # a worker that left the group (setsid) and still holds a GPU
            yield from end_survivors(rest, lambda: self.survivors(rec), grace, self._wait)

    def _note_asked(self, run_id: str | None, action: str) -> None:
        """Before the first signal: the end of this run is asked for (see ``record.write_asked``)."""
        if not run_id:
            return
        self._exits.asked[run_id] = action
        while len(self._exits.asked) > _FOREGROUND_KEEP:
            self._exits.asked.pop(next(iter(self._exits.asked)))
        if not run_id.startswith("pane:"):
            write_asked(self.spec.state_path, run_id, action, self._clock())

    def abort(self, grace_s: float | None = None, on_step: StepFn | None = None,
              asked: str = "abort") -> JobState:
        for message in self.abort_steps(grace_s, asked):
            if on_step:
                on_step(message)
        return self._settled_status()

    def _settled_status(self, timeout_s: float = 2.0) -> JobState:
        """Status once the pane has noticed its process died (tmux reaps asynchronously)."""
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.status()
            if not st.running or time.monotonic() >= deadline:
                return st
            time.sleep(0.02)

    def _keeper(self, st: JobState) -> int | None:
        """The pane process not to signal directly: our wrapper or a user's shell."""
        return keeper(st, self._record())

    def _wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if done():
                return True
            if time.monotonic() >= deadline:
                return False
            self._sleep(0.05)

    # --------------------------------------------------------------- relaunch
    def relaunch(self, grace_s: float | None = None, on_step: StepFn | None = None) -> JobState:
        """Abort if alive, wait for the old run to release its GPUs, start again.

        The state seen before taking the lock is compared with the state under
        it: if another caller relaunched meanwhile, this call does nothing.
        """
        self._require()
        self._need_command()
        step = on_step or (lambda _m: None)
        before = incarnation(self.status())
        with JobLock(self.spec.lock_path, timeout_s=self._lock_timeout_s):
            st = self.status()
            if st.running and incarnation(st) != before:
                step(f"already relaunched by another caller: {st.line()}")
                return st
            if st.running and not st.managed and st.pane is not None:
                raise HandStarted(st)
            surv = self.survivors()
            if not st.running and surv.run_alive:
                raise SurvivorsAlive("relaunch", surv.pids, True)
            old = set(st.pids) | set(surv.pids)
            if st.running:
                spared = self._keeper(st)
                if spared is not None and proc_name(spared) in SHELLS:
                    old.discard(spared)
                st = self.abort(grace_s, step, asked="relaunch")
                if st.running:
                    raise JobError(f"could not stop the old run: {st.line()}")
            self._preflight(old, step)
            self._launch(step)
            return self._wait_started()

    def _preflight(self, old: set[int], step: StepFn) -> None:
        wait_released(old, self.gpu_holders, self.spec.gpus, self.spec.preflight_timeout_s, step, self._sleep)

    # --------------------------------------------------------------- takeover
    def adoption(self, st: JobState | None = None) -> Adoption | None:
        """What taking over the job's pane would do, when the user started it by hand.

        None when there is nothing to take over: no pane, or the pane already
        runs dflash-watch's wrapper (a plain relaunch does then).
        """
        self._require()
        st = st if st is not None else self.status()
        if st.pane is None or st.managed:
            return None
        return survey(self.tmux, self.spec.session, st.pane, self._foreground.get(st.pane),
                      self.spec.command, self.spec.cwd)

    def take_over(self, adoption: Adoption, grace_s: float | None = None, command: str | None = None,
                  on_step: StepFn | None = None) -> JobState:
        """Make the hand-started pane of ``adoption`` a managed job (see ``takeover.py``)."""
        from .takeover import take_over

        return take_over(self, adoption, grace_s, command, on_step)


# Names of the old single-file module, importable from here as before.
__all__ = [
    "Adoption", "AlreadyRunning", "ControlUnavailable", "ExitWatcher", "Foreground", "GpuHolders", "HandStarted",
    "Job",
    "JobError", "JobSpec", "JobState", "OUTSIDE_SIGNALS", "RelaunchRefused", "SHELLS", "STATES", "WRAPPER_PATH",
    "classify_exit", "default_state_dir", "proc_alive", "proc_foreground_pgid", "proc_group", "proc_name",
    "proc_pgid", "proc_signal_groups", "proc_signal_pids", "proc_start_time", "proc_tree",
]
