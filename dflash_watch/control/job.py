"""The tmux-managed training job: start, status, abort, relaunch, exit events.

Why this shape:
- The job lives in a tmux pane, not in dflash-watch: quitting or killing the
  dashboard never touches it (nothing here registers atexit or signal
  handlers), and the user can attach to it as usual.
- The pane runs ``wrapper.py``, which records the exit code and signal in a
  state file; tmux's own dead-pane status is only a fallback.
- Start and relaunch run under an flock and re-check the job under it, and
  ``respawn-pane`` is never given ``-k`` (tmux refuses to respawn a live
  pane), so concurrent callers cannot end up with two trainings.
- Linux ``/proc`` gives the process tree; no third-party dependency.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

from parsers.events import ProcessExit

from .lock import JobLock
from .tmux import (
    Tmux,
    TmuxError,
    TmuxMissing,
    TmuxServerGone,
    TmuxTargetMissing,
    escape_arg,
    escape_format,
    validate_name,
)

WRAPPER_PATH = str(Path(__file__).resolve().with_name("wrapper.py"))
STATES = ("running", "exited", "killed", "absent")
SHELLS = frozenset({"bash", "zsh", "sh", "dash", "fish", "ksh", "tcsh", "csh", "mksh", "nu", "xonsh"})
# Signals that mean "stopped from outside" (CONTRACTS: process_exit kind killed).
OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})

GpuHolders = Callable[[], "list[tuple[int, int, int, str]]"]
StepFn = Callable[[str], None]


class ControlUnavailable(RuntimeError):
    """Job control is off (tmux missing); monitoring is unaffected."""


class JobError(RuntimeError):
    """A start/abort/relaunch could not be done; the message says why in one line."""


class AlreadyRunning(JobError):
    def __init__(self, state: "JobState") -> None:
        super().__init__(f"already running in {state.session} (pid {state.pid}); use relaunch to restart it")
        self.state = state


class RelaunchRefused(JobError):
    """Processes of the old run still hold the job's GPUs (or are still alive)."""

    def __init__(self, message: str, pids: tuple[int, ...]) -> None:
        super().__init__(message)
        self.pids = pids


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "dflash-watch"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What to run and where (the ``[run]`` table of the config, or flags).

    ``gpus``: the job's GPU indices; when set, any process holding memory on
    them blocks a relaunch, whoever owns it. ``preflight_timeout_s``: how long
    relaunch waits for the old run to let go before refusing.
    """

    command: str  # may be empty for status/abort; start/relaunch need it
    session: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    socket: str | None = None
    window: str | None = None
    grace_s: float = 30.0
    state_dir: Path = field(default_factory=default_state_dir)
    gpus: tuple[int, ...] | None = None
    preflight_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        validate_name(self.session, "session")
        if self.window is not None:
            validate_name(self.window, "window")
        if not isinstance(self.command, str):
            raise ValueError("run command must be a string")
        for key in self.env:
            if not key or "=" in key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"invalid environment variable name {key!r}")
        if self.grace_s < 0:
            raise ValueError("grace period must be >= 0 seconds")

    @property
    def key(self) -> str:
        """A file-name-safe identity of (socket, session, window)."""
        sock = re.sub(r"[^A-Za-z0-9_.-]", "_", self.socket or "default")
        parts = [sock, self.session] + ([self.window] if self.window else [])
        return "--".join(re.sub(r"[^A-Za-z0-9_.+-]", "_", p) for p in parts)

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir) / f"{self.key}.state.json"

    @property
    def lock_path(self) -> Path:
        return Path(self.state_dir) / f"{self.key}.lock"

    @property
    def target(self) -> str:
        """tmux target of the job's window; ``=`` asks for exact name matches."""
        return f"={self.session}:" + (f"={self.window}" if self.window else "")


@dataclass(frozen=True, slots=True)
class JobState:
    """One look at the job. ``pids`` is the pane's process tree while running,
    else any processes of the last run still alive."""

    state: str
    session: str
    code: int | None = None
    signal: int | None = None
    pid: int | None = None
    pids: tuple[int, ...] = ()
    started_at: float | None = None
    uptime_s: float | None = None
    message: str = ""
    pane: str | None = None
    run_id: str | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    def line(self) -> str:
        """One line for the CLI and the TUI status bar."""
        if self.state == "running":
            up = f", up {_duration(self.uptime_s)}" if self.uptime_s is not None else ""
            text = f"running in {self.session} (pid {self.pid}, {len(self.pids)} processes{up})"
        elif self.state == "killed":
            text = f"killed by {_signame(self.signal)} in {self.session}"
        elif self.state == "exited":
            code = "unknown" if self.code is None else str(self.code)
            text = f"exited with code {code} in {self.session}"
        else:
            text = f"absent: {self.session}"
        return f"{text}: {self.message}" if self.message else text


@dataclass(frozen=True, slots=True)
class _Pane:
    pane_id: str
    pid: int
    dead: bool
    dead_status: int | None
    dead_signal: int | None


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
        self.tmux = tmux or Tmux(socket=spec.socket)
        self.gpu_holders = gpu_holders
        self._clock = clock
        self._sleep = sleep
        self._lock_timeout_s = lock_timeout_s
        self._reported: set[str] = set()
        self._last_run: str | None = None

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
        try:
            data = json.loads(self.spec.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _pane(self) -> _Pane | None:
        """The active pane of the job's window, None if the window is gone."""
        fmt = "#{pane_active}\t#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}"
        try:
            out = self.tmux.run("list-panes", "-t", self.spec.target, "-F", fmt).stdout
        except TmuxTargetMissing:
            return None
        rows = [line.split("\t") for line in out.splitlines() if line.count("\t") == 5]
        rows.sort(key=lambda r: r[0] != "1")  # the active pane first
        if not rows:
            return None
        _, pane_id, pid, dead, status, sig = rows[0]
        return _Pane(pane_id, int(pid), dead == "1", _int(status), _int(sig))

    # ----------------------------------------------------------------- status
    def status(self) -> JobState:
        self._require()
        rec = self._record()
        now = self._clock()
        try:
            pane = self._pane()
            gone = f"session {self.spec.session} not found"
        except TmuxServerGone:
            pane, gone = None, "tmux server not running"
        survivors = self._survivors(rec, exclude=pane.pid if pane and not pane.dead else None)
        if pane is None:
            msg = gone
            if rec and rec.get("state") in ("exited", "killed"):
                msg += f"; last run {_rec_outcome(rec)}"
            if survivors:
                msg += f"; processes of the last run still alive: {_pids(survivors)}"
            return JobState("absent", self.spec.session, code=_int(rec and rec.get("code")),
                            signal=_int(rec and rec.get("signal")), pids=survivors, message=msg,
                            run_id=rec.get("run_id") if rec else None)
        ours = bool(rec) and rec.get("wrapper_pid") == pane.pid
        run_id = rec.get("run_id") if ours else f"pane:{pane.pane_id}:{pane.pid}"
        if not pane.dead:
            tree = proc_tree(pane.pid)
            if not ours and proc_name(pane.pid) in SHELLS:
                fg = proc_foreground_pgid(pane.pid)
                if fg in (pane.pid, None):
                    return JobState("exited", self.spec.session, pid=pane.pid, pane=pane.pane_id,
                                    message="pane is at an interactive shell prompt (exit status unknown)")
                run_id = f"{run_id}:{fg}"  # one incarnation per foreground job of the shell
            started = rec.get("started_at") if ours else proc_start_time(pane.pid)
            return JobState("running", self.spec.session, pid=pane.pid, pids=tree, started_at=started,
                            uptime_s=None if started is None else max(0.0, now - started),
                            pane=pane.pane_id, run_id=run_id)
        if ours and rec.get("state") in ("exited", "killed"):
            code, sig, msg = _int(rec.get("code")), _int(rec.get("signal")), str(rec.get("message") or "")
        else:
            code, sig = pane.dead_status, pane.dead_signal
            msg = "" if (code is not None or sig is not None) else "tmux reported no exit status"
            if ours:
                msg = "wrapper ended without recording (killed?)" + (f"; {msg}" if msg else "")
        if survivors:
            msg = (msg + "; " if msg else "") + f"processes of the last run still alive: {_pids(survivors)}"
        return JobState("killed" if sig else "exited", self.spec.session, code=code, signal=sig, pid=pane.pid,
                        pids=survivors, started_at=rec.get("started_at") if ours else None, message=msg,
                        pane=pane.pane_id, run_id=run_id)

    def _survivors(self, rec: dict | None, exclude: int | None) -> tuple[int, ...]:
        """Processes of the recorded run's process group that outlived it."""
        pgid = _int(rec and rec.get("pgid"))
        if not pgid:
            return ()
        return tuple(p for p in proc_group(pgid) if p != exclude)

    # -------------------------------------------------------------- exit event
    def poll_exit(self, now: float, signature: str | None = None) -> ProcessExit | None:
        """A ProcessExit the first time this run incarnation is seen ended, else None.

        Never raises: it is the Monitor's per-tick hook and must not break
        monitoring (tmux missing or gone just means nothing to report).
        ``signature`` is the last crash signature seen in the log.
        """
        try:
            st = self.status()
        except (ControlUnavailable, TmuxError, OSError):
            return None
        if st.running:
            self._last_run = st.run_id
            return None
        key = st.run_id or self._last_run
        if not key or key in self._reported:
            return None
        rec = self._record()
        rec_done = bool(rec) and rec.get("run_id") == key and rec.get("state") in ("exited", "killed")
        if st.code is None and st.signal is None and not rec_done and key != self._last_run:
            return None  # never seen running and no status: nothing known to report
        self._reported.add(key)
        ended = rec.get("ended_at") if rec_done else None
        kind, sig = classify_exit(st.code, st.signal, signature)
        return ProcessExit(time=float(ended) if ended else now, kind=kind, code=st.code, signal=sig,
                           signature=signature)

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
            self._launch(step)
            return self._wait_started()

    def _need_command(self) -> None:
        if not self.spec.command.strip():
            raise JobError("no run command configured: set [run] command in the config or pass --cmd")

    def _launch(self, step: StepFn) -> None:
        """Launch under the lock. remain-on-exit is set in the same tmux call."""
        spec = self.spec
        self._need_command()
        run_id = uuid.uuid4().hex
        spec.state_path.parent.mkdir(parents=True, exist_ok=True)
        spec.state_path.unlink(missing_ok=True)
        argv = [sys.executable, "-I", WRAPPER_PATH, "--state", str(spec.state_path), "--run-id", run_id,
                "--", "bash", "-c", spec.command]
        opts: list[str] = []
        if spec.cwd:
            opts += ["-c", escape_format(os.path.abspath(os.path.expanduser(spec.cwd)))]
        for key, value in spec.env.items():
            opts += ["-e", f"{key}={value}"]
        cmd = argv
        remain = ["set-option", "-w", "-t", spec.target, "remain-on-exit", "on"]
        try:
            pane = self._pane()
        except TmuxServerGone:
            pane = None
        if pane is not None:
            if not pane.dead:
                raise JobError(f"pane {pane.pane_id} of {spec.session} is alive (pid {pane.pid}); "
                               "dflash-watch only respawns dead panes")
            self.tmux.run(*_chain(remain, ["respawn-pane", "-t", pane.pane_id, *opts, "--", *cmd]))
            step(f"respawned pane {pane.pane_id} in {spec.session}")
        elif spec.window and self.tmux.has_session(spec.session):
            self.tmux.run(*_chain(["new-window", "-d", "-t", f"={spec.session}:", "-n", spec.window, *opts,
                                   "--", *cmd], remain))
            step(f"created window {spec.window} in {spec.session}")
        else:
            name = ["-n", spec.window] if spec.window else []
            self.tmux.run(*_chain(["new-session", "-d", "-s", spec.session, *name, *opts, "--", *cmd], remain))
            step(f"created session {spec.session}")

    def _wait_started(self, timeout_s: float = 5.0) -> JobState:
        """Wait until the wrapper has recorded its child (or the pane died)."""
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.status()
            rec = self._record()
            if not st.running or (rec and rec.get("state") != "starting") or time.monotonic() >= deadline:
                return st
            time.sleep(0.02)

    # ------------------------------------------------------------------ abort
    def abort_steps(self, grace_s: float | None = None) -> Iterator[str]:
        """Ctrl-C, wait, SIGTERM the process groups, wait, SIGKILL; yields one message per step."""
        self._require()
        grace = self.spec.grace_s if grace_s is None else grace_s
        st = self.status()
        if not st.running:
            yield f"not running ({st.line()})"
            return
        rec = self._record()
        ours = bool(rec) and rec.get("wrapper_pid") == st.pid
        # The wrapper is spared so that it records how its child ended (and
        # exits by itself); a user's interactive shell is spared, full stop.
        keeper = self._keeper(st)
        victims = {p for p in st.pids if p != keeper}
        pgids = {g for g in (proc_pgid(p) for p in victims) if g and g != proc_pgid(keeper or -1)}
        if ours and _int(rec.get("pgid")):
            pgids.add(int(rec["pgid"]))
        watch = victims | ({keeper} if ours and keeper else set())

        def stopped() -> bool:
            return not any(proc_alive(p) for p in watch) and not any(proc_group(g) for g in pgids)

        t0 = time.monotonic()
        self.tmux.run("send-keys", "-t", st.pane or self.spec.target, "C-c")
        yield f"sent Ctrl-C to pane {st.pane}; waiting up to {grace:g} s"
        if self._wait(stopped, grace):
            yield f"stopped after Ctrl-C ({time.monotonic() - t0:.1f} s)"
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            hit = proc_signal_groups(pgids, sig) | proc_signal_pids(victims, sig)
            yield f"sent {_signame(sig)} to {len(hit)} processes ({_pids(tuple(sorted(hit)))})"
            if self._wait(stopped, wait):
                yield f"stopped after {_signame(sig)} ({time.monotonic() - t0:.1f} s)"
                return
        left = sorted(p for p in victims if proc_alive(p))
        yield f"still alive after SIGKILL: {_pids(tuple(left))}"

    def abort(self, grace_s: float | None = None, on_step: StepFn | None = None) -> JobState:
        for message in self.abort_steps(grace_s):
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
        if not st.pid:
            return None
        rec = self._record()
        if (rec and rec.get("wrapper_pid") == st.pid) or proc_name(st.pid) in SHELLS:
            return st.pid
        return None

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
        before = _incarnation(self.status())
        with JobLock(self.spec.lock_path, timeout_s=self._lock_timeout_s):
            st = self.status()
            if st.running and _incarnation(st) != before:
                step(f"already relaunched by another caller: {st.line()}")
                return st
            old = set(st.pids) | set(self._survivors(self._record(), exclude=None))
            if st.running:
                keeper = self._keeper(st)
                if keeper is not None and proc_name(keeper) in SHELLS:
                    old.discard(keeper)
                st = self.abort(grace_s, step)
                if st.running:
                    raise JobError(f"could not stop the old run: {st.line()}")
            self._preflight(old, step)
            self._launch(step)
            return self._wait_started()

    def _preflight(self, old: set[int], step: StepFn) -> None:
        deadline = time.monotonic() + self.spec.preflight_timeout_s
        told = False
        while True:
            alive = tuple(sorted(p for p in old if proc_alive(p)))
            holders = self._gpu_blockers(old, step)
            if not alive and not holders:
                if told:
                    step("old run released its processes and GPUs")
                return
            blocking = tuple(sorted(set(alive) | {pid for _, pid, _, _ in holders}))
            if time.monotonic() >= deadline:
                where = ", ".join(f"pid {pid} on GPU {gpu} ({used / 2**30:.1f} GiB, {name or '?'})"
                                  for gpu, pid, used, name in holders)
                raise RelaunchRefused(
                    f"refusing to relaunch: old run still holds {_pids(blocking)}"
                    + (f" [{where}]" if where else "")
                    + f" after {self.spec.preflight_timeout_s:g} s", blocking)
            if not told:
                step(f"waiting up to {self.spec.preflight_timeout_s:g} s for {_pids(blocking)} to exit")
                told = True
            self._sleep(0.2)

    def _gpu_blockers(self, old: set[int], step: StepFn) -> list[tuple[int, int, int, str]]:
        if self.gpu_holders is None:
            return []
        try:
            rows = list(self.gpu_holders())
        except Exception as exc:  # a broken GPU source must not block control
            step(f"GPU check skipped: {exc}")
            return []
        if self.spec.gpus is not None:
            return [r for r in rows if r[0] in self.spec.gpus]
        return [r for r in rows if r[1] in old]


def classify_exit(code: int | None, sig: int | None, signature: str | None = None) -> tuple[str, int | None]:
    """(kind, signal) for a process_exit event.

    bash reports a child killed by signal N as code 128+N; those count as the
    signal. SIGKILL/SIGTERM/SIGINT/SIGHUP are "killed" (from outside);
    SIGSEGV, SIGABRT and non-zero codes are crashes. An unknown status is a
    crash only when the log showed one.
    """
    if sig is None and code is not None and 128 < code <= 128 + 64 and (code - 128) in OUTSIDE_SIGNALS:
        sig = code - 128
    if sig is not None:
        return ("killed" if sig in OUTSIDE_SIGNALS else "crash"), sig
    if code is None:
        return ("crash" if signature else "clean"), None
    return ("clean" if code == 0 else "crash"), None


def _chain(*commands: list[str]) -> list[str]:
    """Several tmux commands in ONE invocation (so nothing happens between
    them), each data argument escaped so tmux never splits it at a ``;``."""
    out: list[str] = []
    for i, command in enumerate(commands):
        if i:
            out.append(";")
        out.extend(escape_arg(a) for a in command)
    return out


def _incarnation(st: JobState) -> str | None:
    """What identifies one run across callers: the pane and its process (stable from launch on)."""
    return f"{st.pane}:{st.pid}" if st.pane else st.run_id


def _int(value: object) -> int | None:
    if value is None or value == "" or value is False:
        return None
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _signame(sig: int | None) -> str:
    try:
        return signal.Signals(sig).name if sig else "unknown signal"
    except ValueError:
        return f"signal {sig}"


def _pids(pids: tuple[int, ...]) -> str:
    return "pids " + ", ".join(map(str, pids)) if pids else "no pids"


def _rec_outcome(rec: dict) -> str:
    if rec.get("signal"):
        return f"killed by {_signame(_int(rec.get('signal')))}"
    return f"exited with code {rec.get('code')}"


def _duration(seconds: float | None) -> str:
    s = int(seconds or 0)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# ------------------------------------------------------------ /proc helpers
# Linux only, stdlib only. A zombie counts as dead: it holds no memory.

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
