"""One-line fatal signals: lines that say a process died, without a traceback.

The NCCL watchdog, SLURM, the kernel's OOM killer, a shell's ``Killed`` and
torch elastic's own log lines tell of a death in one line each. Some are the
root cause of an incident (a watchdog timeout on a hung rank, SLURM's time
limit, the OOM killer); others only follow from one (torch elastic's
``Sending process N closing signal SIGTERM`` to the surviving siblings, its
``failed (exitcode: 1)`` line, C++'s ``terminate called after throwing``
once NCCL aborted). The second group gets a cause from
``parsers.crash.signatures.COLLATERAL_CAUSES`` so that the crash detector merges
it into the incident instead of alerting on it, and none of them is ever
``killed``: torchrun stopping its own children is not a kill from outside.

A reader deduplicates per rank (or job) over a window: a watchdog prints the
same timeout once a minute until the process dies.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from ..events import Crash
from .signatures import SIGNAL_NAMES, agent_signal, normalise, signal_signature

# Literal substrings of the lines read here (the stream's scanner triggers).
# Few and without digits: each one costs the scan of every chunk (one
# "received by PID" instead of "Signal 9", "Signal 15", "(SIGSEGV)"...
# keeps the noise scan as fast as before these readers grew).
TRIGGERS: tuple[str, ...] = (
    "Watchdog caught collective operation timeout",
    "slurmstepd",
    "received by PID",
    "Killed",
    "closing signal SIG",
    "failed (exitcode",
    "terminate called after throwing",
    "SignalException",
)

_GLOG_CPP = re.compile(r"^\[[IWEF]\d{4} [\d:.]+ [^\]]*\]\s*")
_GLOG_PY = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+\s+\S+:\d+\]\s*")
_NCCL_RANK = re.compile(r"\[Rank (\d+)\]")
_SLURM = re.compile(
    r"slurmstepd(?:-[\w.-]+)?: error: \*\*\* (STEP|JOB) (\d+)(?:\.\w+)? ON \S+ CANCELLED AT \S+"
    r"(?: DUE TO ([A-Z ]+?))?\s*\*\*\*"
)
_SLURM_OOM = re.compile(r"slurmstepd(?:-[\w.-]+)?: error: Detected \d+ oom[-_ ]kill event\(s\) in StepId=(\d+)")
_SIGNAL = re.compile(r"Signal (\d+) \((SIG[A-Z]+)\) received by PID (\d+)")
# The shell's report of a SIGKILLed child: bare ``Killed``, bash's
# ``script.sh: line 3: 1234 Killed   python train.py``, a job-table line.
_KILLED = re.compile(r"^\s*Killed\s*$|^\S.*: line \d+:\s+\d+ Killed\b|^\[\d+\][+-]?\s+Killed\s")
_OOM_KILLER = re.compile(r"Out of memory: Killed process (\d+)")
# torch elastic's agent (torch/distributed/elastic/multiprocessing/api.py).
_CLOSING = re.compile(r"Sending process (\d+) closing signal (SIG[A-Z]+)")
_CHILD_EXIT = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)(?: \(pid: (\d+)\))?")


def worker_exited(text: str) -> bool:
    """torch elastic's agent says a worker process exited (``failed
    (exitcode: 1) local_rank: 1``): it prints this once its workers are
    gone, so no traceback of theirs goes on past it."""
    return _CHILD_EXIT.search(text) is not None


_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
# The agent itself got a signal: that one did come from outside.
_AGENT_SIGNAL = re.compile(r"SignalException: Process (\d+) got signal: (\d+)")

_MESSAGE_CHARS = 4000
_WINDOW_S = 300.0  # one fatal signal per rank (or job) in this long
_KEYS_MAX = 4096
# What one fatal line is about: its family and its rank, pid or group.
_Key = tuple[str, str | int | None]


class SignalReader:
    """Reads one-line fatal signals of one log; remembers what it reported."""

    __slots__ = ("_seen", "_source")

    def __init__(self, source: Callable[[int], str]) -> None:
        # ``source(lineno) -> str``: the assembler's ``file:line`` naming.
        self._source = source
        self._seen: dict[_Key, float] = {}

    def read(self, text: str, rank: int | None, lineno: int, time: float) -> Crash | Literal[True] | None:
        """The Crash this line reports; True when it was a signal line
        already reported (consumed, nothing new); None when it is none."""
        if "Watchdog caught collective operation timeout" in text:
            body = _GLOG_CPP.sub("", text).strip()
            found = _NCCL_RANK.search(body)
            who = int(found.group(1)) if found else rank
            return self._emit(("nccl", who), lineno, time, "nccl_timeout", None, body, who, "DistBackendError")
        if "slurmstepd" in text:
            return self._slurm(text, rank, lineno, time)
        if "closing signal SIG" in text:
            closing = _CLOSING.search(text)
            if closing is not None:
                body = _GLOG_PY.sub("", text.strip())
                return self._emit(("closing", closing.group(1)), lineno, time, "exception", "torchrun_stopping",
                                  body, rank, "torchrun")
        if "failed (exitcode" in text:
            exited = _CHILD_EXIT.search(text)
            if exited is not None:
                body = _GLOG_PY.sub("", text.strip())
                code = int(exited.group(1))
                return self._emit(("exit", exited.group(3) or exited.group(2)), lineno, time, "exception",
                                  "child_exit", body, int(exited.group(2)) if rank is None else rank,
                                  f"exitcode {code}")
        if "terminate called after throwing" in text:
            thrown = _TERMINATE.search(text)
            if thrown is not None:
                return self._emit(("terminate", rank), lineno, time, "exception", "terminate", text.strip(), rank,
                                  thrown.group(1))
        if "SignalException" in text:
            agent = _AGENT_SIGNAL.search(text)
            if agent is not None:
                kind, cause = agent_signal(agent.group(0))
                return self._emit(("agent", agent.group(1)), lineno, time, kind, cause, text.strip(), rank,
                                  "SignalException")
        signal = _SIGNAL.search(text)
        if signal is not None and not text.lstrip().startswith("traceback"):
            # (``traceback : Signal 15 ...`` is a field of torch elastic's
            # report, read there; on its own it is a report cut apart.)
            name = signal.group(2)
            if name in ("SIGKILL", "SIGTERM"):
                kind, cause = "killed", name.lower()
            elif name in SIGNAL_NAMES:
                kind, cause = "segfault", SIGNAL_NAMES[name]
            else:
                return None
            return self._emit(("signal", signal.group(3)), lineno, time, kind, cause, text.strip(), rank, name)
        if "Killed" in text:
            oom = _OOM_KILLER.search(text)
            if oom is not None:
                return self._emit(("oom-killer", oom.group(1)), lineno, time, "host_oom", "oom_killer",
                                  text.strip(), rank, "OOMKiller")
            if _KILLED.match(text) is not None:
                return self._emit(("killed", rank), lineno, time, "killed", "sigkill", text.strip(), rank, "Killed")
        return None

    def _slurm(self, text: str, rank: int | None, lineno: int, time: float) -> Crash | Literal[True] | None:
        slurm = _SLURM.search(text)
        body = text[text.index("slurmstepd"):].strip()
        if slurm is not None:
            reason = (slurm.group(3) or "").strip()
            cause = {
                "": "slurm_cancelled", "TIME LIMIT": "slurm_time_limit",
                "PREEMPTION": "slurm_preempted", "NODE FAILURE": "slurm_node_failure",
            }.get(reason, "slurm_cancelled")
            return self._emit(("slurm", slurm.group(2)), lineno, time, "killed", cause, body, rank, "slurmstepd")
        oom = _SLURM_OOM.search(text)
        if oom is not None:
            # The cgroup's OOM killer: host memory, not a scheduler's kill.
            return self._emit(("slurm-oom", oom.group(1)), lineno, time, "host_oom", "oom_killer", body, rank,
                              "slurmstepd")
        return None

    def _emit(self, key: _Key, lineno: int, time: float, kind: str, cause: str | None, body: str,
              rank: int | None, exc_type: str) -> Crash | Literal[True]:
        seen = self._seen.get(key)
        if seen is not None and time - seen < _WINDOW_S:
            return True
        self._seen[key] = time
        if len(self._seen) > _KEYS_MAX:
            self._seen.clear()
        return Crash(
            time=time,
            source=self._source(lineno),
            detector="crash",
            kind=kind,
            exc_type=exc_type,
            message=body[:_MESSAGE_CHARS],
            signature=signal_signature(kind, cause, signal_core(kind, body)),
            rank=rank,
            cause=cause,
            text=(body,),
        )


def signal_core(kind: str, body: str) -> str:
    """The part of a signal line that names the failure (not host, job or rank)."""
    if kind == "nccl_timeout":
        op = re.search(r"OpType=(\w+)", body)
        return f"Watchdog caught collective operation timeout OpType={op.group(1) if op else '?'}"
    if "slurmstepd" in body:
        return re.sub(r"\*\*\* (STEP|JOB) \S+ ON \S+ CANCELLED AT \S+", "*** CANCELLED", body)
    return normalise(body)

