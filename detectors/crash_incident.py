"""One crash incident: the root cause, its copies and its consequences.

What ``detectors/crash.py`` merges into one alert, and the small judgements
it makes about single crashes: is this a consequence of another rank's
failure (``is_collateral``), two crashes of one specific class
(``same_class``), "the same crash" by signature or by message
(``signature_of``, ``message_key``), and does a progress line after it
prove that the program went on (``weigh``), did a program run between two
crashes (``restarted``: a relaunch's crash is never a copy), and how much a
consequence says (``weight``). Bounded: an incident keeps at
most ``_COLLATERAL_KEEP`` consequences and ``_RANKS_KEEP`` ranks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..parsers.crash.signatures import COLLATERAL_CAUSES, WEAK_CAUSES, short_type
from ..parsers.events import Crash, Progress
from .base import Alert

_COLLATERAL_KEEP = 32
_RANKS_KEEP = 1024
# Kinds that are a death by themselves: nothing follows them.
FATAL_KINDS = frozenset({"killed", "segfault"})


@dataclass(frozen=True, slots=True)
class CrashEpisode:
    """One incident as seen across ranks: what ``episodes()`` returns."""

    detector: str
    kind: str
    signature: str
    first_time: float
    last_time: float
    ranks: tuple[int, ...]
    count: int
    alert: Alert
    # The other crashes merged into it (consequences, the report), and
    # whether it was a caught traceback the program survived.
    collateral: int = 0
    survived: bool = False
    # torch elastic's report merged into it (its one-line summary), if any:
    # it may arrive after the alert was sent.
    report: str | None = None


def is_report(c: Crash) -> bool:
    return short_type(c.exc_type) == "ChildFailedError"


def is_collateral(c: Crash) -> bool:
    """A consequence of another rank's failure (or the agent's account of it)."""
    return c.cause in COLLATERAL_CAUSES or c.kind == "nccl_timeout" or is_report(c)


def ends_workers(c: Crash) -> bool:
    """torch elastic's word that the worker group is gone: only a restart
    prints a rank's crash below it."""
    return c.cause == "child_exit" or is_report(c)


# Appended to a file's name in an incident whose lines were counted
# before the file's numbering began again (a NUL: in no log's name).
RENUMBERED = "\x00before its lines were counted again"


def stream_of(c: Crash | Progress) -> tuple[str, int | None, int]:
    """(file, rank, line) of an event's ``source``."""
    file, _, line = c.source.rpartition(":")
    return file, c.rank, int(line) if line.isdigit() else -1


class Incident:
    __slots__ = (
        "root", "root_collateral", "silent", "first_time", "last_time", "deadline", "ranks", "count",
        "copies", "collateral", "report", "sealed", "survived", "alert", "sent", "folded", "signature",
        "base_step", "file", "last_line", "arrival", "window_end", "known", "proof", "proof_late",
        "disproved", "proof_line", "first_line", "stream",
    )

    def __init__(self, crash: Crash, signature: str, arrival: float, hold: float, window: float) -> None:
        self.root = crash
        self.root_collateral = is_collateral(crash)
        self.silent = crash.cause in WEAK_CAUSES
        self.signature = signature
        self.first_time = crash.time
        self.last_time = crash.time
        # Data time when it was first seen; the alert waits ``hold`` from
        # there for the other ranks' copies, and progress up to
        # ``window_end`` decides whether the program survived it.
        self.arrival = arrival
        self.window_end = arrival + window
        self.deadline = max(arrival + hold, self.window_end)
        self.known = False  # a signature already seen survived: long window
        # Progress lines of its stream after it: steps later than before it
        # (``proof``: inside the window; ``proof_late``: at any time), or
        # a step not later (``disproved``: a relaunch, not the run going on).
        self.proof = 0
        self.proof_late = 0
        self.disproved = False
        self.proof_line = -1
        self.ranks: list[int] = []
        self.count = 0
        self.copies: dict[str, int] = {}
        self.collateral: list[Crash] = []
        self.report: Crash | None = crash if is_report(crash) else None
        self.sealed = self.root_collateral or crash.kind in FATAL_KINDS
        self.survived: str | None = None
        self.alert: Alert | None = None
        self.sent = False
        self.folded: Incident | None = None  # a survived repeat: counted in that episode
        # The last step its stream reported before the exception line: only
        # a later step is the same run going on (a relaunch starts again).
        self.base_step: int | None = None
        # Where in which file it was last seen: a report follows its root in
        # the same file even when the root's stamp is stale (see _latest).
        self.file, _, self.last_line = stream_of(crash)
        self.first_line = self.last_line
        # (file, rank) of the root: the stream whose step lines prove it
        # survived, compared on every step line while it is held.
        self.stream: tuple[str, int | None] = (self.file, crash.rank)
        self._count_in(crash)

    def renumbered(self, file: str) -> None:
        """``file``'s lines are counted from 1 again (``Renumbered``): this
        incident's lines there become those of a file no line will come
        from, so none of the new lines is taken for one after them (proof
        that it survived) or near them (its report)."""
        if self.file == file:
            self.file = file + RENUMBERED
        if self.stream[0] == file:
            self.stream = (file + RENUMBERED, self.stream[1])

    def _count_in(self, c: Crash) -> None:
        file, _, line = stream_of(c)
        if file == self.file:
            self.last_line = max(self.last_line, line)
            self.first_line = min(self.first_line, line)
        self.count += 1
        self.last_time = max(self.last_time, c.time)
        if c.rank is not None and c.rank not in self.ranks and len(self.ranks) < _RANKS_KEEP:
            self.ranks.append(c.rank)

    def add_copy(self, c: Crash) -> None:
        self._count_in(c)
        name = short_type(c.exc_type) or c.kind
        self.copies[name] = self.copies.get(name, 0) + 1
        if self.folded is not None:
            self.folded.add_copy(c)

    def add_collateral(self, c: Crash) -> None:
        self._count_in(c)
        self.sealed = True
        if is_report(c) and self.report is None:
            self.report = c
        if len(self.collateral) < _COLLATERAL_KEEP:
            self.collateral.append(c)

    def promote(self, c: Crash, signature: str) -> None:
        """A root cause arrived after its consequences: it names the incident."""
        old = self.root
        self.collateral.insert(0, old)
        del self.collateral[_COLLATERAL_KEEP:]
        self.root = c
        file, rank, _ = stream_of(c)
        self.stream = (file, rank)
        if is_report(c) and self.report is None:
            self.report = c
        self.signature = signature
        self.root_collateral = is_collateral(c)
        self.silent = False
        self.first_time = min(self.first_time, c.time)
        self._count_in(c)

    def survivable(self, detector: str) -> bool:
        root = self.root
        return (
            detector == "crash" and not self.sealed and bool(root.frames) and root.kind not in FATAL_KINDS
            and not self.root_collateral
        )

    def snapshot(self, detector: str) -> CrashEpisode:
        assert self.alert is not None
        return CrashEpisode(
            detector, self.root.kind, self.signature, self.first_time, self.last_time, tuple(sorted(self.ranks)),
            self.count, self.alert, len(self.collateral), self.survived is not None,
            self.report.message if self.report is not None else None,
        )


def same_class(a: Crash, b: Crash) -> bool:
    """Two crashes of one specific class (``cuda_oom``, ``invalid_device_ordinal``,
    ``disk_full``...) close together are one failure seen twice; a plain
    ``exception`` without a cause says too little to tell."""
    if is_collateral(a) or is_collateral(b) or a.kind != b.kind or a.cause != b.cause:
        return False
    return a.kind != "exception" or a.cause is not None


# Progress lines after a traceback that prove the run went on: one is not
# enough, tqdm redraws its bar once more when the dying process closes it.
PROOF_LINES = 2


def weigh(inc: Incident, line: int, step: int | None, in_window: bool) -> None:
    """Count one progress line of the crash's stream as evidence of life.

    Only lines after the exception line that name a step count; a step not
    later than the last one before the crash is a relaunch starting again,
    and then nothing after it proves anything."""
    if step is None or line <= inc.last_line or line <= inc.proof_line or inc.disproved:
        return
    if inc.base_step is not None and step <= inc.base_step:
        inc.disproved = True
        return
    inc.proof_line = line
    inc.proof_late += 1
    if in_window:
        inc.proof += 1


def signature_of(c: Crash) -> str:
    return c.signature or f"{c.exc_type}:{c.message[:120]}"


_DIGITS = re.compile(r"\d+")


def message_key(c: Crash) -> str:
    """A second notion of "the same crash": ranks that print at once
    interleave their frames, so one crash can reach us under several
    signatures. The same exception type with the same message, up to the
    numbers in it (the rank's GPU, its free bytes), within the window, is a
    copy too."""
    exc = c.exc_type.rsplit(".", 1)[-1]
    return f"msg|{c.detector}|{c.kind}|{exc}|{_DIGITS.sub('#', ' '.join(c.message.split()))[:160]}"


def weight(c: Crash) -> int:
    """How much a consequence says about its incident: torchrun's own lines
    nothing, its report or a peer gone the failing rank, a collective timeout
    the class of failure (the rank that timed out waited for another)."""
    if c.cause in WEAK_CAUSES:
        return 0
    return 2 if c.kind == "nccl_timeout" else 1


def may_promote(inc: Incident, c: Crash) -> bool:
    """Can ``c`` be the root cause of ``inc``, whose consequences reached
    us first? From the same file only if printed before all of them (a
    rank's traceback is held until its end is known, so torch elastic's
    lines after it may be read first); a crash printed after torch
    elastic's report is the next stage's. From another file, yes while
    no report has closed the incident."""
    file, _, line = stream_of(c)
    if file == inc.file:
        return line < inc.first_line
    return inc.report is None


# Per (file, rank): its last progress lines as (line, step, data time).
ProgressSeen = Mapping[tuple[str, int | None], Iterable[tuple[int, int | None, float]]]


def restarted(inc: Incident, c: Crash, progress: ProgressSeen, ends: Iterable[tuple[int, bool]] = ()) -> bool:
    """Did a program run between ``inc`` and ``c``? Then ``c`` is no copy
    or consequence of ``inc`` however close in time: a relaunch that
    crashes again is a new incident (a crash loop alerts every time).

    ``ends``: the lines of ``inc``'s file where torch elastic said a
    worker group was gone, as (line, is its report). Its ``failed
    (exitcode: N)`` line with no report after it (before the later of the
    two crashes) means the same agent restarted the group
    (``--max-restarts``): a crash on the other side of it is the restarted
    group's. After a report the agent itself is gone; what follows is the
    next command of a script, whose failure may be a consequence of this
    one (a stage that finds no checkpoint): the window judges that.

    Read from the progress lines between the two: in ``inc``'s file, the
    lines after its last one (and before ``c`` when ``c`` is in that file
    too); in another file of ``c``, its stream's lines stamped after
    ``inc`` arrived. Per stream (file, rank): a line naming a step lower
    than the stream's last step before ``inc`` is a relaunch starting
    again; so are ``PROOF_LINES`` lines (one is not enough: tqdm redraws
    a dying process's bar once more) that do not all go on past that
    step, or any after a crash that came before the first step. Lines
    that go on past it are the same program living on: a repeat of a
    traceback it was seen to survive (inside the survival window) stays
    one episode; of one it was not (the proof came late or never), a new
    incident, so a fatal repeat is never hidden in a critical one."""
    c_file, _, c_line = stream_of(c)
    if is_report(c) and c_file == inc.file and c_line > inc.first_line:
        # torch elastic's report ends the agent that ran ``inc``'s group,
        # which logged the group's end (``failed (exitcode: N)``) just before
        # it. Progress lines between are its workers' own, late: a
        # block-buffered stdout flushed at exit puts a rank's steps after its
        # traceback (``torchrun ... > out 2>&1``), and they were read as a
        # relaunch (two critical alerts for one crash). A relaunch by the
        # same agent ends a group twice (``--max-restarts``). After another
        # report (the next command of a script) the rules below judge.
        between = [report for at, report in ends if inc.first_line < at < c_line]
        if not any(between):
            return len(between) >= 2
    if c_file == inc.file and not ends_workers(c) and c_line >= 0:
        lo, hi = (inc.first_line, c_line) if c_line > inc.first_line else (c_line + 1, inc.first_line)
        marks = sorted(end for end in ends if lo <= end[0] < hi)
        if marks and not marks[-1][1]:
            return True  # the last mark between them is a group's end, not its agent's
    if not progress:
        return False
    for (file, _rank), seen in progress.items():
        if file == inc.file:
            upto = c_line if file == c_file else None
            after = [step for at, step, _ in seen if at > inc.last_line and (upto is None or at < upto)]
            before = [step for at, step, _ in seen if at < inc.first_line and step is not None]
        elif file == c_file:
            after = [step for at, step, when in seen if when > inc.arrival and at < c_line]
            before = [step for at, step, when in seen if when <= inc.arrival and step is not None]
        else:
            continue
        if not after:
            continue
        base = max(before) if before else None
        steps = [step for step in after if step is not None]
        if base is not None and steps and min(steps) < base:
            return True
        if len(after) < PROOF_LINES:
            continue
        if base is None or not steps or min(steps) <= base or inc.proof < PROOF_LINES:
            return True
    return False
