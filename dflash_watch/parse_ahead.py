"""A log parsed in a forked child while this process judges it.

Replay's time splits about evenly between parsing a log (reading, decoding,
scanning, columns, clocks: ``log_batches``) and the Monitor judging its
events (issue 20: 0.76 s and 0.80 s of a 1.56 s replay of the 1.2M-line
progress log). Neither needs to wait for the other: the child runs
``log_batches`` and sends each batch down a pipe, and this process rebuilds
it and feeds the Monitor while the child reads on. The same batches come
out, in the same order, with the same notices and end time
(tests/shell/test_parse_ahead.py); only the work is in two places.

The wire: each message an 8-byte length and a pickle. A batch's
``Progress`` events go as columns (one list per field, read in C where
built) and are made again by ``new_progress``: pickling the objects
themselves cost more than the whole replay (0.27 s against 0.23 s on 120k
lines), the columns 0.05 s. Any other event is pickled as it is, with its
place in the batch.

The child is forked, so it starts in a millisecond with everything this
process imported and configured (the time zone, the progress pattern, the
code cache). Ctrl-C is this process's to handle: SIGINT is held back
across the fork and the child ignores it. The child leaves by
``os._exit``: no atexit handler of ours (the code cache's write) runs
twice, no stdio buffer it inherited is flushed twice. It dies with this
process (Linux's PR_SET_PDEATHSIG; elsewhere at its next write, which
finds nobody reading), holds no other child's pipe, and is killed and
reaped when this process stops reading early or drops its reader unread.
It is forked when its reader is made, not at the first batch asked for,
so that in a merge of several logs every child parses from the start.

Used where it can only help (``chosen``): a platform with ``fork``, a
process with no other thread (a fork copies locks held by threads it does
not copy), a log of ``MIN_BYTES`` or more, one child for each CPU beyond
this process's (the largest logs first); and not where
``DFLASH_WATCH_PARSE_AHEAD=0`` says not to. Elsewhere ``log_batches`` runs
here as before.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from itertools import islice
from traceback import format_exception
from typing import Any, BinaryIO, cast

from dflash_watch.parsers.events import Event, Progress, new_progress
from dflash_watch.parsers.step_columns import columns_of, read

from .gc_policy import bulk_read
from .ingest import log_stream
from .log_batches import ReplayInputError, log_batches

MIN_BYTES = 4 << 20  # below this a log parses in ~30 ms: a fork and a pipe would not pay
PIPE_BYTES = 1 << 20  # the pipe's capacity: at Linux's default (64 KiB) a batch does not fit, and the two sides take turns
OFF_ENV = "DFLASH_WATCH_PARSE_AHEAD"
_OFF = {"0", "false", "no", "off"}
CPU_MAX = "/sys/fs/cgroup/cpu.max"  # cgroup v2: this process's CPU quota and period

_HEADER = struct.Struct("<Q")
_ALL = columns_of(*(f.name for f in fields(Progress)))
_BATCH, _END, _ERROR = 0, 1, 2


def chosen(paths: Sequence[str], *, min_bytes: int | None = None) -> set[int]:
    """Which of ``paths`` (their places) to parse in children here and now:
    the largest of those of ``min_bytes`` (``MIN_BYTES``) or more, one for
    each CPU beyond the one this process judges on; none where the
    module's text says not."""
    least = MIN_BYTES if min_bytes is None else min_bytes
    if os.environ.get(OFF_ENV, "").strip().lower() in _OFF or not hasattr(os, "fork"):
        return set()
    if threading.active_count() != 1:
        return set()
    spare = usable_cpus() - 1
    sizes = []
    for i, path in enumerate(paths):
        try:
            size = os.stat(path).st_size
        except OSError:
            continue  # ``log_batches`` says why, as it would have
        if size >= least:
            sizes.append((-size, i))
    return {i for _, i in sorted(sizes)[: max(spare, 0)]}


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), fewer where its
    cgroup's quota allows less (``cpu.max``: a container given 1.5 CPUs of
    a 64-core box has one to spare, not 63; a child without a CPU of its
    own only slows the replay down)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        with open(CPU_MAX) as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota here
    return cpus


def forked_batches(
    path: str,
    *,
    tz: Any = None,
    progress_pattern: Any = None,
    notices: list[str] | None = None,
    ends: list[float] | None = None,
) -> Iterator[list[Event]]:
    """``replay.log_batches(path, ...)``, parsed in a child forked now: the
    same batches, notices (added as they were read) and end time; an
    exception of the child's is raised here, as ``log_batches`` would have
    raised it. The child starts at once, not at the first batch asked for:
    in a merge of several logs every child parses from the start, not each
    once the one before it gave a batch. A reader dropped unread kills and
    reaps its child when it is collected."""
    child = _forked(path, tz, progress_pattern)
    if child is None:  # no descriptor or process to spare: parse here
        return log_batches(path, tz=tz, progress_pattern=progress_pattern, notices=notices, ends=ends)
    return _batches(child, path, notices, ends)


@dataclass(slots=True, weakref_slot=True)
class _Child:
    """A parse-ahead child, from its fork until it is reaped."""

    pid: int
    r: int  # this process's end of its pipe
    # Kills (if not done), reaps and closes, once: at the end of reading or
    # when the reader is collected unread.
    end: weakref.finalize = field(init=False)


def _forked(path: str, tz: Any, progress_pattern: Any) -> _Child | None:
    """Fork the child that parses ``path``; None where no pipe or process is to be had."""
    # The log's parser made here once, before the fork: its scanner's
    # database (compiled, or read from the code cache) is then this
    # process's, inherited by the child, and kept by the code cache at exit
    # (the child leaves by ``os._exit`` and keeps nothing). A parser that
    # cannot be made fails in the child too, and that error is raised there.
    try:
        log_stream(path, tz=tz, progress_pattern=progress_pattern, at=0.0, replay=True)
    except Exception:  # noqa: BLE001, S110 - raised again, the same, by the child's ``log_batches``
        pass
    parent = os.getpid()
    # Ctrl-C held back across the fork: a SIGINT that reached the child
    # before it ignores SIGINT would raise in this function's code, in the
    # child, and run the caller's code there. Here it is raised once the
    # child's end is registered (``_Child.end``).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        try:
            r, w = os.pipe()
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None
        if pid == 0:  # the child
            _child(w, r, parent, mask, path, tz, progress_pattern)  # never returns
        os.close(w)
        _reading.add(r)
        child = _Child(pid, r)
        child.end = weakref.finalize(child, _end, pid, r, [False])
        return child
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _batches(child: _Child, path: str, notices: list[str] | None, ends: list[float] | None) -> Iterator[list[Event]]:
    """The child's messages, read: its batches rebuilt, its notices and end
    time added, its error raised; the child ended at the end (``_end``)."""
    done = [False]  # the child answered to the end: nothing to kill
    try:
        with open(child.r, "rb", closefd=False) as inp:
            while True:
                message = _receive(inp)
                if message is None:  # it died (killed, out of memory)
                    child.end.detach()
                    how = _end(child.pid, child.r, done)
                    # one line for stderr, as any input that cannot be replayed
                    raise ReplayInputError(f"{path}: the process parsing it ended early ({how})")
                tag = message[0]
                if tag == _BATCH:
                    _, columns, others, said = message
                    if notices is not None:
                        notices.extend(said)
                    yield _rebuilt(columns, others)
                elif tag == _END:
                    _, said, last = message
                    if notices is not None:
                        notices.extend(said)
                    if ends is not None:
                        ends.extend(last)
                    done[0] = True
                    return
                else:
                    done[0] = True
                    raise message[1]
    finally:
        if child.end.alive:
            child.end.detach()
            _end(child.pid, child.r, done)


def _end(pid: int, r: int, done: list[bool]) -> str:
    """A child's end: killed unless it answered to the end (``done[0]``),
    reaped (its pid no longer ours to signal after), its pipe closed. How
    it ended, in words."""
    _reading.discard(r)
    try:
        os.close(r)
    except OSError:
        pass
    if not done[0]:
        _kill(pid)
    return _reap(pid)


# The read ends of the pipes of this process's children: a child forked
# later closes them, or an earlier child would not find its reader gone
# (the merge of several logs) until the later one ended.
_reading: set[int] = set()


def _child(w: int, r: int, parent: int, mask: Any, path: str, tz: Any, progress_pattern: Any) -> None:
    """Parse ``path`` and send it down ``w``; leave by ``os._exit``, whatever happens."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C held back is dropped
        for fd in (r, *_reading):
            os.close(fd)
        _die_with(parent)
        _widen(w)
        with open(w, "wb") as out:
            notices: list[str] = []
            ends: list[float] = []
            told = 0
            try:
                with bulk_read():
                    for batch in log_batches(path, tz=tz, progress_pattern=progress_pattern, notices=notices, ends=ends):
                        _send(out, (_BATCH, *_packed(batch), notices[told:]))
                        told = len(notices)
                _send(out, (_END, notices[told:], ends))
                code = 0
            except BrokenPipeError:
                code = 0  # nobody reads: the parent is gone or done
            except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent, to be raised there
                exc.add_note("(raised while parsing ahead, in the child:)\n" + "".join(format_exception(exc)))
                _send(out, (_ERROR, _portable(exc)))
    except BaseException:  # noqa: BLE001, S110 - the child must never return into the parent's code
        pass
    finally:
        os._exit(code)


def _die_with(parent: int) -> None:
    """Be killed when ``parent`` ends (Linux's PR_SET_PDEATHSIG), even in a
    stretch of the log that gives nothing to send: a write finds nobody
    reading only when there is one to make. A parent gone already: leave."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the next write tells
    if os.getppid() != parent:
        os._exit(0)


_PR_SET_PDEATHSIG = 1


def _widen(fd: int) -> None:
    """The pipe's capacity up to ``PIPE_BYTES`` where Linux lets us (a
    user's pipe pages have a soft limit); the default works, only slower."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):
        pass


def _packed(batch: list[Event]) -> tuple[tuple[list[Any], ...] | None, list[tuple[int, Event]]]:
    """A batch as its ``Progress`` events' columns and the other events with
    their places; or no columns and every event in its place where one
    object stands in the batch twice (columns would make two of it, and a
    detector may tell "the same event again" by identity)."""
    if len(set(map(id, batch))) < len(batch):
        return None, list(enumerate(batch))
    if set(map(type, batch)) == {Progress}:
        return read(cast("list[Progress]", batch), _ALL), []
    progress = [e for e in batch if type(e) is Progress]
    others = [(i, e) for i, e in enumerate(batch) if type(e) is not Progress]
    return read(progress, _ALL), others


def _rebuilt(columns: tuple[list[Any], ...] | None, others: list[tuple[int, Event]]) -> list[Event]:
    """``_packed``'s batch made again: the same events in the same places."""
    if columns is None:
        return [event for _, event in others]
    progress: list[Event] = list(map(new_progress, *columns))
    if not others:
        return progress
    out: list[Event] = []
    rest = iter(progress)
    at = 0
    for i, event in others:
        out.extend(islice(rest, i - at))
        out.append(event)
        at = i + 1
    out.extend(rest)
    return out


def _send(out: BinaryIO, message: tuple[Any, ...]) -> None:
    blob = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(blob)))
    out.write(blob)
    out.flush()


def _receive(inp: BinaryIO) -> tuple[Any, ...] | None:
    """The next message, or None where the pipe ended before a whole one."""
    head = inp.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    blob = inp.read(size)
    if len(blob) < size:
        return None
    message: tuple[Any, ...] = pickle.loads(blob)
    return message


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle, else a RuntimeError with its type and text."""
    try:
        pickle.loads(pickle.dumps(exc, pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - any failure to carry it
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _reap(pid: int) -> str:
    """Wait for the child; how it ended, in words."""
    try:
        _, status = os.waitpid(pid, 0)  # (retried on EINTR by Python)
    except ChildProcessError:  # reaped by the system (SIGCHLD set to SIG_IGN)
        return "no status"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
