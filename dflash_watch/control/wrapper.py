"""The process tmux runs in the job's pane: it runs the training and records how it ended.

Why: tmux 3.3 sometimes reports a dead pane with an empty exit status, and a
pane that dies before ``remain-on-exit`` applies loses its status entirely.
The wrapper writes its own record (JSON, atomic tmp+rename) with the run id,
pids, start and end time, exit code and signal, so the status of a run never
depends on tmux remembering it.

It behaves like a job-control shell: the child gets its own process group
and, when the pane is a terminal, becomes the terminal's foreground group so
Ctrl-C in the pane reaches the training directly. SIGINT/SIGTERM/SIGHUP sent
to the wrapper are forwarded to that group, and the wrapper exits the way
the child did (same code, or killed by the same signal).

Standard library only, and run by file path (``python -I wrapper.py``), so
it works in a training directory where dflash_watch is not importable.

Usage: ``python -I wrapper.py --state FILE [--run-id ID] -- bash -c "COMMAND"``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STATE_VERSION = 1


def write_state(path: str, record: dict) -> None:
    """Atomically replace ``path`` so a reader never sees half a record."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _terminal_fd() -> int | None:
    try:
        return 0 if os.isatty(0) else None
    except OSError:
        return None


def _give_terminal(fd: int | None, pgid: int) -> None:
    """Make ``pgid`` the terminal's foreground group (ignoring SIGTTOU as shells do)."""
    if fd is None:
        return
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgid)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, old)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dflash-watch-wrapper")
    parser.add_argument("--state", required=True, help="JSON file to record the run in")
    parser.add_argument("--run-id", default="", help="identifier of this run incarnation")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("no command given after --")

    record: dict = {
        "version": STATE_VERSION,
        "run_id": args.run_id,
        "state": "starting",
        "wrapper_pid": os.getpid(),
        "pid": None,
        "pgid": None,
        "started_at": time.time(),
        "ended_at": None,
        "code": None,
        "signal": None,
        "argv": command,
        "cwd": os.getcwd(),
        "message": "",
    }
    child_pgid: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child_pgid:
            try:
                os.killpg(child_pgid[0], signum)
            except ProcessLookupError:
                pass
        else:
            pending.append(signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)

    tty = _terminal_fd()

    def in_child() -> None:
        # Own process group, foreground on the pane's terminal, default
        # dispositions (ignored signals would survive exec).
        os.setpgid(0, 0)
        _give_terminal(tty, os.getpid())
        for sig in (*FORWARDED, signal.SIGTTOU, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)

    try:
        child = subprocess.Popen(command, preexec_fn=in_child, close_fds=True)
    except OSError as exc:
        record.update(state="exited", code=127, ended_at=time.time(), message=f"cannot run command: {exc}")
        write_state(args.state, record)
        print(f"dflash-watch wrapper: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return 127

    try:
        os.setpgid(child.pid, child.pid)  # racing the child's own call, as shells do
    except OSError:
        pass
    _give_terminal(tty, child.pid)
    child_pgid.append(child.pid)
    record.update(state="running", pid=child.pid, pgid=child.pid)
    write_state(args.state, record)
    for signum in pending:
        forward(signum, None)

    while True:
        try:
            _, status = os.waitpid(child.pid, 0)
            break
        except ChildProcessError:
            status = 0
            break
    record["ended_at"] = time.time()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        record.update(state="killed", signal=sig, code=None)
    else:
        record.update(state="exited", code=os.WEXITSTATUS(status), signal=None)
    _give_terminal(tty, os.getpgrp())
    write_state(args.state, record)

    if record["signal"]:
        sig = record["signal"]
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the child already dumped, if anyone
        except (ValueError, OSError):
            pass
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig  # only if the signal did not end us (e.g. SIGCHLD)
    return int(record["code"])


if __name__ == "__main__":
    sys.exit(main())
