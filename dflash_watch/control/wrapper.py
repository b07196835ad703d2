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

A shell command (``--shell COMMAND``, what ``start --cmd`` gives) runs in
``bash -c`` with a small prologue, so that a pipeline reports the status of
the *training*, not of its last stage: ``python train.py 2>&1 | tee
train.log`` ends with tee's 0 in plain bash. An EXIT trap writes ``$?`` and
``PIPESTATUS`` to a side file; the wrapper then records the first failing
stage's status (``set -o pipefail`` would give the last failing one, which
for ``train | tee`` is the same, but for ``train | grep`` would be grep's),
and a stage status 128+N as death by signal N, as shells report it. The
prologue also turns SIGTERM/SIGHUP into "exit once the running pipeline has
ended", so bash neither dies before its children (leaving the training
running behind a dead pane) nor goes on to the next command of a list.
SIGINT keeps bash's own rule (die with the child when the child died of
it), and that rule can cut a trap short: after a Ctrl-C that one stage
survived (a trainer that ignores it, while ``cat`` died of it), bash marks
the list interrupted and, once the pipeline has ended, leaves the SIGTERM
trap after any of its commands, then either exits with that command's
status (0 or 1) or goes on with the list. So the trap keeps the pipeline's
statuses in its first command, a DEBUG trap ends the shell before any
command that would run after a signal's trap began, and the side file says
a signal's trap kept the statuses: the wrapper then trusts them over bash's
own exit status. The abort of ``trainer | cat; touch next`` under load (busy
loops on both cores, 3 aborts at once): misreported 2 times in 300 before this, 0 in
600 with it.

Standard library only, and run by file path (``python -I wrapper.py``), so
it works in a training directory where dflash_watch is not importable.

The record also holds what identifies the processes later (the start
time in clock ticks of the wrapper and of the training, and the session):
a training that outlives the tmux server is found by identity, never by a
pid alone (``survivors.py``). The training's environment carries the run id
(``DFLASH_WATCH_RUN_ID``) and lacks the variables named by ``--unset`` (the
watcher's alert secrets). When the watcher asked for the end (abort,
relaunch), it leaves ``STATE.asked`` naming the run; the record then says
``"asked"`` so the exit reads as a stop the user asked for.

Usage: ``python -I wrapper.py --state FILE [--run-id ID] [--unset NAME]... --shell "COMMAND"``
or ``python -I wrapper.py --state FILE [--run-id ID] -- ARGV...``
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
SIGNAL_STATUS = range(129, 128 + 65)  # a shell's status for "killed by signal status-128"
RUN_ID_ENV = "DFLASH_WATCH_RUN_ID"  # = survivors.RUN_ID_ENV (this file imports nothing of dflash_watch)
ASKED_SUFFIX = ".asked"  # = record.ASKED_SUFFIX

# Runs before the user's command, in the same bash. $1 is the side file; it
# is shifted away so the command sees no positional parameters, as in a
# plain ``bash -c``. Variables are prefixed so they cannot meet the user's.
# A trap runs between commands, never inside one: each trap's first simple
# command reads $? and PIPESTATUS, and keeps what a trap before it kept
# (``${var-...}``), so a second signal, a trap run inside another, or the
# exit that cuts a trap short never loses the statuses of the pipeline that
# ended. A signal's trap exits unless an exit has begun; the EXIT trap
# ignores further signals and writes how it came (``signal`` or ``exit``),
# bash's status and the stage statuses.
SHELL_PROLOGUE = "; ".join((  # one line: bash's "line N" in the command's own errors stays N + 1
    "__dfw_status_file=$1", "shift", "unset __dfw_rc __dfw_ps __dfw_exiting __dfw_dbg",
    "trap '__dfw_ps=${__dfw_ps-${PIPESTATUS[*]}} __dfw_rc=${__dfw_rc-$?} __dfw_how=${__dfw_exiting-exit} "
    "__dfw_exiting=exit; trap \"\" TERM HUP; "
    "printf \"%s %s %s\\n\" \"$__dfw_how\" \"$__dfw_rc\" \"$__dfw_ps\" > \"$__dfw_status_file\" 2>/dev/null' EXIT",
    "trap '__dfw_ps=${__dfw_ps-${__dfw_dbg+$__dfw_dps}${__dfw_dbg-${PIPESTATUS[*]}}} "
    "__dfw_rc=${__dfw_rc-${__dfw_dbg+$__dfw_drc}${__dfw_dbg-$?}} __dfw_was=${__dfw_exiting-} "
    "__dfw_exiting=${__dfw_exiting-signal}; [ -n \"$__dfw_was\" ] || exit \"$__dfw_rc\"' TERM HUP",
    # The signal's trap cut short before its exit (see the docstring) lets
    # bash go on with the list: the DEBUG trap, run before the next command,
    # exits in its place (not in the EXIT trap, whose commands it also
    # precedes). A pending signal's trap can run inside it, after its first
    # command: that first command keeps $? and PIPESTATUS, which the DEBUG
    # trap itself has not changed yet, for the signal's trap to read (seen:
    # "signal 0 0", the DEBUG trap's own status, in 6 of 300 aborts without it).
    # ``__dfw_dbg`` is set and empty: the signal's trap reads it as
    # ``${dbg+kept}${dbg-now}``, and a value would be appended to the kept
    # status (seen: code 1431 for a SIGTERM's 143, when it held "1").
    "trap '__dfw_dps=${PIPESTATUS[*]} __dfw_drc=$? __dfw_dbg=; "
    "[ \"${__dfw_exiting-}\" != signal ] || exit \"$__dfw_rc\"; unset __dfw_dbg' DEBUG",
)) + "\n"


def shell_argv(command: str, status_file: str) -> list[str]:
    """``bash -c`` running ``command`` after the prologue (on its own line, so its syntax is untouched)."""
    return ["bash", "-c", SHELL_PROLOGUE + command + "\n", "bash", status_file]


def read_status_file(path: str) -> tuple[int, list[int], bool] | None:
    """(bash's ``$?``, PIPESTATUS, whether a signal's trap kept them) as the
    EXIT trap wrote them; None if it did not."""
    try:
        with open(path, encoding="ascii") as fh:
            words = fh.read().split()
    except (OSError, ValueError):
        return None
    if len(words) < 2 or words[0] not in ("exit", "signal"):
        return None
    try:
        numbers = [int(w) for w in words[1:]]
    except ValueError:
        return None
    return numbers[0], numbers[1:], words[0] == "signal"


def shell_outcome(code: int, side: tuple[int, list[int], bool] | None) -> tuple[int | None, int | None, list[int]]:
    """(code, signal, stage statuses) of a ``--shell`` run whose bash exited with ``code``.

    When bash's status is its last pipeline's (the script ran to its end,
    or exited with that status), the first failing stage counts, and a
    stage status 128+N is death by signal N. Otherwise bash's own status
    counts (an explicit ``exit 7``, a syntax error, ``if false; then``),
    except after a SIGTERM/SIGHUP: the trap kept the statuses of the
    pipeline the signal ended, and bash may have left the trap early with
    another status (see the module's docstring).
    """
    if side is None:
        return code, None, []
    rc, stages, by_signal = side
    if by_signal:
        code = rc
    if rc != code or not stages or stages[-1] != code:
        return code, None, stages
    status = next((s for s in stages if s != 0), 0)
    if status in SIGNAL_STATUS:
        return None, status - 128, stages
    return status, None, stages


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


def _identity(pid: int | str) -> tuple[int | None, int | None]:
    """(start ticks since boot, session id) of a process, from /proc; Nones when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
        fields = raw[raw.rfind(")") + 2:].split()
        return int(fields[19]), int(fields[3])
    except (OSError, ValueError, IndexError):
        return None, None


def _asked(state: str, run_id: str) -> str | None:
    """The action (abort, relaunch) the watcher left for this run, else None."""
    try:
        with open(state + ASKED_SUFFIX, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and run_id and data.get("run_id") == run_id:
        return str(data.get("action") or "abort")
    return None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dflash-watch-wrapper")
    parser.add_argument("--state", required=True, help="JSON file to record the run in")
    parser.add_argument("--run-id", default="", help="identifier of this run incarnation")
    parser.add_argument("--shell", default=None, help="a shell command line, run by bash -c (pipelines report their first failing stage)")
    parser.add_argument("--unset", action="append", default=[], metavar="NAME",
                        help="an environment variable the training must not inherit (repeatable)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    status_file = None
    if args.shell is not None:
        if command:
            parser.error("give either --shell COMMAND or an argv after --, not both")
        status_file = f"{args.state}.pipestatus"
        _unlink(status_file)
        command = shell_argv(args.shell, status_file)
    if not command:
        parser.error("no command given after --")

    env = {k: v for k, v in os.environ.items() if k not in set(args.unset)}
    if args.run_id:
        env[RUN_ID_ENV] = args.run_id
    for name in args.unset:
        os.environ.pop(name, None)
    my_ticks, my_sid = _identity("self")
    record: dict = {
        "version": STATE_VERSION,
        "run_id": args.run_id,
        "state": "starting",
        "wrapper_pid": os.getpid(),
        "wrapper_start": my_ticks,
        "sid": my_sid,
        "pid": None,
        "pid_start": None,
        "pgid": None,
        "started_at": time.time(),
        "ended_at": None,
        "code": None,
        "signal": None,
        "argv": ["bash", "-c", args.shell] if args.shell is not None else command,
        "command": args.shell,
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

    for forwarded in FORWARDED:
        signal.signal(forwarded, forward)

    tty = _terminal_fd()

    def in_child() -> None:
        # Own process group, foreground on the pane's terminal, default
        # dispositions (ignored signals would survive exec).
        os.setpgid(0, 0)
        _give_terminal(tty, os.getpid())
        for sig in (*FORWARDED, signal.SIGTTOU, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)

    try:
        child = subprocess.Popen(command, preexec_fn=in_child, close_fds=True, env=env)
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
    record.update(state="running", pid=child.pid, pgid=child.pid, pid_start=_identity(child.pid)[0])
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
        sig: int | None = os.WTERMSIG(status)
        record.update(state="killed", signal=sig, code=None)
    elif status_file is not None:
        code, sig, stages = shell_outcome(os.WEXITSTATUS(status), read_status_file(status_file))
        record.update(state="killed" if sig else "exited", code=code, signal=sig)
        if len(stages) > 1:
            record["pipestatus"] = stages
            if any(stages):
                record["message"] = ("pipeline stage statuses " + " | ".join(map(str, stages))
                                     + ": the first failing stage counts")
    else:
        record.update(state="exited", code=os.WEXITSTATUS(status), signal=None)
    if status_file is not None:
        _unlink(status_file)
    asked = _asked(args.state, args.run_id)
    if asked:
        record["asked"] = asked
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
