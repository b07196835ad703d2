"""torch elastic's ``ChildFailedError`` report, read one line at a time.

When a worker of ``torchrun`` (or ``accelerate launch``, which runs torch
elastic underneath) dies, the agent raises ``ChildFailedError`` and prints a
table between two ``====`` rules::

    train.py FAILED
    ----------------
    Failures:
    [1]:
      rank      : 0 (local_rank: 0)
      exitcode  : -15 (pid: 9042)  (SIGTERM)
      traceback : Signal 15 (SIGTERM) received by PID 9042
    ----------------
    Root Cause (first observed failure):
    [0]:
      rank      : 1 (local_rank: 1)
      exitcode  : 1 (pid: 9043)
      traceback : To enable traceback see: ...

Only the ``Root Cause`` section says what went wrong: the ``Failures`` are
the siblings, and an exit code of -15 there is the SIGTERM the agent itself
sent them to stop the job. So the report keeps the root entry whole and the
failures only as (rank, exit code) pairs, and nothing here ever turns a
sibling's -15 into "killed from outside".

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from .signatures import ChildReport

_FAILED = re.compile(r"^\s*(\S.*?) FAILED\s*$")
_R_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)(?:\s*\(local_rank:\s*(\d+)\))?")
_R_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
_R_TRACE = re.compile(r"^\s*traceback\s*:\s*(.*?)\s*$")
_SECTION = re.compile(r"^\s*\[\d+\]:\s*$")
RULE = re.compile(r"^\s*={8,}\s*$")

# A report longer than this is not one (a runaway log): give it up.
REPORT_LINES = 5000
_FAILURES_KEEP = 1024

class _Entry(NamedTuple):
    """What one section of the report says about its rank."""

    rank: int | None
    local: int | None
    exitcode: int | None
    pid: int | None
    trace: str | None


_NO_ENTRY = _Entry(None, None, None, None, None)


@dataclass(slots=True)
class ReportReader:
    """The report's state while its lines pass; ``report()`` when it ends."""

    rules: int = 1
    lines: int = 0
    in_root: bool = False
    script: str | None = None
    rank: int | None = None
    local: int | None = None
    exitcode: int | None = None
    pid: int | None = None
    trace: str | None = None
    root: _Entry | None = None
    failures: list[tuple[int, int | None]] = field(default_factory=list)

    def feed(self, text: str) -> bool:
        """Take one line; True when it was the closing rule (or the report
        ran past any sane length) and the report is complete."""
        self.lines += 1
        if RULE.match(text) is not None:
            self.rules += 1
            return self.rules >= 2
        stripped = text.strip()
        failed = _FAILED.match(text)
        if failed is not None and self.script is None:
            self.script = failed.group(1).strip()
        elif stripped.startswith("Root Cause"):
            self.close_section()
            self.in_root = True
        elif stripped.startswith("Failures:"):
            self.close_section()
            self.in_root = False
        elif _SECTION.match(text) is not None:
            self.close_section()
        else:
            rank = _R_RANK.match(text)
            if rank is not None:
                self.rank = int(rank.group(1))
                self.local = int(rank.group(2)) if rank.group(2) else None
            else:
                code = _R_EXIT.match(text)
                if code is not None:
                    self.exitcode = int(code.group(1))
                    self.pid = int(code.group(2)) if code.group(2) else None
                else:
                    tb = _R_TRACE.match(text)
                    if tb is not None:
                        self.trace = tb.group(1)
        return self.lines > REPORT_LINES

    def close_section(self) -> None:
        if self.rank is None and self.exitcode is None:
            return
        if self.in_root:
            if self.root is None:
                self.root = _Entry(self.rank, self.local, self.exitcode, self.pid, self.trace)
        elif self.rank is not None and len(self.failures) < _FAILURES_KEEP:
            self.failures.append((self.rank, self.exitcode))
        self.rank = self.local = self.exitcode = self.pid = None
        self.trace = None

    def report(self) -> ChildReport:
        self.close_section()
        root = self.root or _NO_ENTRY
        return ChildReport(
            script=self.script,
            root_rank=root.rank,
            root_local_rank=root.local,
            root_exitcode=root.exitcode,
            root_pid=root.pid,
            root_traceback=root.trace,
            failed_ranks=tuple(rank for rank, _ in self.failures),
            # Siblings the agent stopped itself (exit -15 after its SIGTERM).
            stopped_ranks=tuple(rank for rank, code in self.failures if code == -15),
        )


def report_message(report: ChildReport, message: str) -> str:
    """One line: what failed, the root cause's rank and exit, who else."""
    parts = []
    if report.script:
        parts.append(f"{report.script} FAILED")
    if report.root_rank is not None or report.root_exitcode is not None:
        where = f"root cause rank {report.root_rank}"
        if report.root_local_rank is not None:
            where += f" (local_rank {report.root_local_rank})"
        if report.root_exitcode is not None:
            where += f" exitcode {report.root_exitcode}"
        if report.root_pid is not None:
            where += f" (pid {report.root_pid})"
        parts.append(where)
    if report.root_traceback and not report.root_traceback.startswith("To enable traceback"):
        parts.append(f"traceback: {report.root_traceback}")
    stopped = set(report.stopped_ranks)
    failed = [r for r in report.failed_ranks if r not in stopped]
    if failed:
        parts.append("also failed: ranks " + ",".join(str(r) for r in failed))
    if stopped:
        parts.append("stopped by torchrun (SIGTERM): ranks " + ",".join(str(r) for r in report.stopped_ranks))
    summary = "; ".join(parts)
    if message.strip():
        summary = f"{message.strip()}; {summary}" if summary else message.strip()
    return summary or "ChildFailedError"
