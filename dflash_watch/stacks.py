"""Where a hung job waits: the Python stacks of its processes, taken when ``stall`` fires.

A stall says *that* nothing moves; the stacks say *where*: in an
``all_reduce``, a data loader's queue, a checkpoint write. ``py-spy dump``
reads them from outside the process (no code in the training, no signal
handler), so it works on a run that is already hung. It is never required:
without it the alert says "py-spy not installed" once and nothing else
changes.

Bounded by construction: at most ``max_pids`` processes (the job's Python
processes, workers before launchers), dumped in parallel, each given
``timeout_s`` and ``max_bytes`` of output. ``--native`` stays off: native
frames need debug symbols, take seconds per thread and say little more
about a hang in a collective.

When it runs (``StallStacks``): the capture runs on its own thread (the
Monitor's lock is not held while py-spy works) and then amends the firing
alert's evidence in place (``AlertBook.amend``: one episode still fires
once) and says where the full dump went in a notice. What goes out of the
process (headless's stdout, the sinks) is wrapped by ``StallStacks.hold``:
the stall alert waits for its stacks at most ``HOLD_S`` and then goes with
them (or without, as before), because a page that says *where* the job
hangs is worth a few seconds; every other alert goes at once, and a stall
resolve never overtakes its firing. Without py-spy nothing waits. What a
view, a line or a webhook body reads, from the firing ``stall`` alert's
``evidence``:

- ``stacks_status``: ``"captured"``, ``"py-spy not installed"``, ``"job not
  running"``, ``"no Python processes in the job"`` or ``"failed: ..."``;
- ``stacks``: one dict per process, ``{"pid", "command", "thread",
  "frames": [innermost first, at most 5], "error"}``;
- ``stacks_file``: the full dump, ``<state dir>/stacks-<UTC time>-<job key>.txt``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .procfs import proc_cmdline, proc_name, proc_ppid

if TYPE_CHECKING:
    from .monitor import Monitor

TIMEOUT_S = 10.0
MAX_BYTES = 64 * 1024
MAX_PIDS = 16
FRAMES_SHOWN = 5
NO_PYSPY = "py-spy not installed"
# The longest a stall alert waits for its stacks before it is sent without
# them: a dump takes ~0.15 s, a page a few seconds late is still a page.
HOLD_S = 3.0
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([^)]*)\)(?::\s*"(.*)")?')
_FRAME = re.compile(r"^ {4}(\S.*)$")  # a frame; locals and arguments are indented deeper


@dataclass(frozen=True, slots=True)
class StackDump:
    """One process's dump: the full text (bounded) and its main thread's innermost frames."""

    pid: int
    command: str
    text: str = ""
    thread: str = ""
    frames: tuple[str, ...] = ()
    error: str | None = None
    truncated: bool = False

    def summary(self) -> dict[str, Any]:
        return {"pid": self.pid, "command": self.command, "thread": self.thread,
                "frames": list(self.frames), "error": self.error}


@dataclass(frozen=True, slots=True)
class Capture:
    """What one capture found, and where its full text went."""

    time: float
    status: str
    dumps: tuple[StackDump, ...] = ()
    path: str | None = None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stacks_status": self.status}
        if self.dumps:
            out["stacks"] = [d.summary() for d in self.dumps]
        if self.path:
            out["stacks_file"] = self.path
        return out


def main_thread(text: str, pid: int) -> tuple[str, tuple[str, ...]]:
    """(thread header, innermost frames) of the main thread of a ``py-spy dump``.

    The main thread is the one named ``MainThread``, else the one whose id
    is the pid (Linux), else the first listed. py-spy lists frames
    innermost first, two spaces in.
    """
    threads: list[tuple[str, str, list[str]]] = []  # (header, thread id, frames)
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            threads.append((line.strip(), m.group(1), []))
            continue
        f = _FRAME.match(line)
        if threads and f and not f.group(1).startswith(("Arguments:", "Locals:")):
            threads[-1][2].append(f.group(1))
    if not threads:
        return "", ()
    pick = next((t for t in threads if '"MainThread"' in t[0]), None)
    if pick is None:
        pick = next((t for t in threads if t[1] == str(pid)), threads[0])
    return pick[0], tuple(pick[2][:FRAMES_SHOWN])


def python_pids(pids: Iterable[int], limit: int = MAX_PIDS) -> list[int]:
    """The job's Python processes worth a dump: not dflash-watch's wrapper,
    workers (no Python child) before launchers (torchrun's agent), at most ``limit``."""
    found = []
    for pid in pids:
        argv = proc_cmdline(pid)
        name = proc_name(pid)
        exe = os.path.basename(argv[0]) if argv else ""
        if not (name.startswith("python") or exe.startswith("python") or name in ("torchrun", "accelerate")):
            continue
        if any(a.endswith(os.sep + "wrapper.py") and "dflash_watch" in a for a in argv[:4]):
            continue  # our own wrapper: it only waits for the training
        found.append(pid)
    parents = {proc_ppid(p) for p in found}
    found.sort(key=lambda p: (p in parents, p))
    return found[:limit]


def dump(pyspy: str, pid: int, timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_BYTES) -> StackDump:
    """``py-spy dump --pid PID``, bounded in time and output; never raises."""
    command = " ".join(proc_cmdline(pid))[:200]
    try:
        proc = subprocess.Popen([pyspy, "dump", "--pid", str(pid)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    except OSError as exc:
        return StackDump(pid, command, error=f"py-spy could not start: {exc}")
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return StackDump(pid, command, error=f"py-spy timed out after {timeout_s:g} s")
    truncated = len(out) > max_bytes
    text = out[:max_bytes].decode("utf-8", "replace")
    if proc.returncode != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines() or [f"exit {proc.returncode}"]
        # py-spy says "Error: ..." first, then its causes and a Rust backtrace.
        why = next((ln for ln in lines if ln.startswith("Error")), lines[0]).strip()[:300]
        return StackDump(pid, command, text=text, error=f"py-spy failed: {why}")
    thread, frames = main_thread(text, pid)
    return StackDump(pid, command, text=text, thread=thread, frames=frames, truncated=truncated)


def capture(pids: Sequence[int], state_dir: str | os.PathLike[str], now: float, *, key: str = "job",
            pyspy: str | None = None, timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_BYTES,
            max_pids: int = MAX_PIDS) -> Capture:
    """Dump the Python processes among ``pids`` in parallel; write the full text to the state dir."""
    pyspy = pyspy or shutil.which("py-spy")
    if not pyspy:
        return Capture(now, NO_PYSPY)
    targets = python_pids(pids, max_pids)
    if not targets:
        return Capture(now, "no Python processes in the job")
    with ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix="py-spy") as pool:
        dumps = tuple(pool.map(lambda p: dump(pyspy, p, timeout_s, max_bytes), targets))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    path = Path(state_dir) / f"stacks-{stamp}-{key}.txt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            for d in dumps:
                fh.write(f"=== pid {d.pid}: {d.command}\n")
                if d.error:
                    fh.write(f"({d.error})\n")
                fh.write(d.text.rstrip("\n") + "\n")
                if d.truncated:
                    fh.write(f"(cut at {max_bytes} bytes)\n")
                fh.write("\n")
    except OSError as exc:
        return Capture(now, f"captured; not written: {exc}", dumps)
    ok = any(not d.error for d in dumps)
    return Capture(now, "captured" if ok else f"failed: {dumps[0].error}", dumps, str(path))


@dataclass(slots=True)
class _Pending:
    """A capture under way for ``alert`` (the very object the Monitor hands out):
    ``amended`` is set, then ``done``, when its stacks are in."""

    alert: Any
    due: float  # time.monotonic() past which the alert goes without its stacks
    done: threading.Event = field(default_factory=threading.Event)
    amended: Any = None


class HeldListener:
    """``listener`` with the stall alert held until its stacks are in (``StallStacks.hold``).

    Called under the Monitor's lock, so it never waits there: a held alert
    is delivered from a thread of its own, which takes that lock to deliver. Alerts of other detectors go
    straight through; a stall alert that comes while one is held (its
    resolve) queues behind it, so a reader never sees a resolve first.
    """

    def __init__(self, stacks: StallStacks, listener: Callable[[Any], None]) -> None:
        self._stacks = stacks
        self._listener = listener
        self._lock = threading.Lock()
        self._tail: threading.Thread | None = None  # the last held delivery

    def __call__(self, alert: Any) -> None:
        pending = self._stacks.pending_for(alert)
        with self._lock:
            behind = self._tail if self._tail is not None and self._tail.is_alive() else None
            if behind is None and pending is not None and pending.done.is_set():
                alert, pending = pending.amended or alert, None  # already in (a job that was not running)
            if pending is None and (behind is None or alert.detector != "stall"):
                self._listener(alert)
                return
            self._tail = threading.Thread(target=self._later, args=(alert, pending, behind),
                                          name="stall-hold", daemon=True)
            self._tail.start()

    def _later(self, alert: Any, pending: _Pending | None, behind: threading.Thread | None) -> None:
        if behind is not None:
            behind.join()
        if pending is not None:
            pending.done.wait(max(0.0, pending.due - time.monotonic()))
            if pending.done.is_set() and pending.amended is not None:
                alert = pending.amended
        # Every other alert reaches the outputs under the Monitor's lock (the
        # sinks' rate limit and the history gate count on one caller at a time).
        with self._stacks.monitor.lock:
            self._listener(alert)

    def flush(self, timeout: float) -> None:
        """Wait (bounded) for a held alert to be delivered: a watcher about to stop."""
        with self._lock:
            tail = self._tail
        if tail is not None:
            tail.join(timeout)


class StallStacks:
    """The live hook: a ``Monitor`` listener that captures stacks when ``stall`` fires.

    The listener runs under the Monitor's lock, so it only starts a thread;
    one capture at a time. ``job`` is the managed job (``status()`` gives
    its pids); without one, or when it is not running, nothing is dumped.
    It must be subscribed before the listeners that ``hold`` wraps (it is:
    ``LiveSession`` subscribes it when built, the outputs come after).
    """

    def __init__(self, monitor: Monitor, job: Any, state_dir: str | os.PathLike[str], *,
                 pyspy: Callable[[], str | None] = lambda: shutil.which("py-spy"),
                 timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_BYTES, max_pids: int = MAX_PIDS) -> None:
        self.monitor = monitor
        self.job = job
        self.state_dir = state_dir
        self._pyspy = pyspy
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.max_pids = max_pids
        self.hold_s = HOLD_S
        self._busy = threading.Lock()
        self._said_missing = False
        self._pending: _Pending | None = None
        self._held: list[HeldListener] = []
        self.last: Capture | None = None
        self.thread: threading.Thread | None = None

    def __call__(self, alert: Any) -> None:
        if alert.detector != "stall" or alert.state != "firing" or self.job is None:
            return
        if not self._busy.acquire(blocking=False):
            return
        # Without py-spy there is nothing to wait for: the alert goes at once.
        pending = _Pending(alert, time.monotonic() + self.hold_s) if self._pyspy() else None
        self._pending = pending
        self.thread = threading.Thread(target=self._run, args=(alert, pending), name="stall-stacks", daemon=True)
        self.thread.start()

    def hold(self, listener: Callable[[Any], None]) -> HeldListener:
        """``listener`` (an output: stdout, the sinks) with the stall alert held for its stacks."""
        held = HeldListener(self, listener)
        self._held.append(held)
        return held

    def pending_for(self, alert: Any) -> _Pending | None:
        """The capture started for this very alert (done or not), else None."""
        pending = self._pending
        return pending if pending is not None and pending.alert is alert else None

    def flush(self, timeout: float) -> None:
        """Deliver what ``hold`` holds, within about ``timeout``: before the outputs close."""
        deadline = time.monotonic() + timeout
        for held in self._held:
            held.flush(max(0.0, deadline - time.monotonic()))

    def _run(self, alert: Any, pending: _Pending | None = None) -> None:
        try:
            self.last = cap = self._capture()
            if cap.status == NO_PYSPY and not self._said_missing:
                self._said_missing = True
                self.monitor.note("stall: py-spy not installed, no stacks of the hung job (pip install py-spy)")
            elif cap.path:
                n = len(cap.dumps)
                self.monitor.note(f"stall: stacks of {n} process{'es' if n != 1 else ''} written to {cap.path}")
            amended = replace(alert, evidence={**alert.evidence, **cap.evidence()})
            if pending is not None:
                pending.amended = amended
                pending.done.set()  # the held outputs send it now, the lock not needed
            with self.monitor.lock:
                if self.monitor.alerts.amend(alert, amended):
                    self.monitor.version += 1
        except Exception as exc:  # noqa: BLE001 - a capture never breaks monitoring
            self.monitor.note(f"stall: stack capture failed ({type(exc).__name__}: {exc})")
        finally:
            if pending is not None:
                pending.done.set()
            self._busy.release()

    def _capture(self) -> Capture:
        now = time.time()
        try:
            st = self.job.status()
        except Exception as exc:  # noqa: BLE001 - tmux gone: no stacks, said
            return Capture(now, f"failed: job status: {exc}")
        if not st.running:
            return Capture(now, "job not running")
        pyspy = self._pyspy()
        if not pyspy:
            return Capture(now, NO_PYSPY)
        spec = getattr(self.job, "spec", None)
        return capture(st.pids, self.state_dir, now, key=getattr(spec, "key", "job"), pyspy=pyspy,
                       timeout_s=self.timeout_s, max_bytes=self.max_bytes, max_pids=self.max_pids)
