"""What a crash alert says: one human line, the remedy, the evidence.

The message is the root cause in the log's own words ("CUDA out of memory
on rank 3: tried to allocate 2.00 GiB ... (in forward, model.py:33)"); the
evidence holds what an engineer needs next: every rank, the other copies'
exception types, the consequences merged in, torch elastic's report, the
innermost frames and the tail of the traceback.
"""

from __future__ import annotations

import re

from ..parsers.crash.garbled import garbled_line
from ..parsers.crash.remedies import remedy
from ..parsers.events import Crash
from .base import Alert
from .config import DetectorConfig
from .crash_incident import Incident

KIND_LABELS = {
    "cuda_oom": "CUDA out of memory",
    "nccl_timeout": "NCCL timeout",
    "missing_module": "missing Python module",
    "cuda_error": "CUDA error",
    "compile_error": "torch.compile failed",
    "killed": "training killed from outside",
    "host_oom": "host out of memory",
    "segfault": "crashed in native code",
    "exception": "",
}

def describe(c: Crash, detector: str) -> str:
    """One human line: what happened, where, in the log's own words."""
    where = f" on rank {c.rank}" if c.rank is not None else ""
    text = " ".join(c.message.split())
    if len(text) > 240:
        text = text[:237] + "..."
    if detector == "fx_tracing":
        head = f"FX symbolic tracing collided with torch.compile{where}: {c.exc_type}: {text}"
    elif c.kind == "cuda_oom":
        body = text
        for prefix in ("CUDA out of memory. ", "CUDA out of memory.", "CUDA out of memory"):
            if body.startswith(prefix):
                body = body[len(prefix) :].lstrip(" :")
                break
        if body[:1].isupper():
            body = body[0].lower() + body[1:]
        head = f"CUDA out of memory{where}: {body}" if body else f"CUDA out of memory{where}"
    elif c.kind == "killed":
        cause = f" ({c.cause.replace('_', ' ')})" if c.cause else ""
        head = f"training killed from outside{cause}{where}: {text}"
    elif c.kind == "segfault":
        cause = f" ({c.cause.upper()})" if c.cause else ""
        head = f"crashed in native code{cause}{where}: {c.exc_type}: {text}"
    else:
        label = KIND_LABELS.get(c.kind, "")
        if c.kind == "nccl_timeout" and c.cause is not None:
            label = "collective timeout"  # gloo, a process group, the c10d store
        head = f"{label}{where}: {c.exc_type}: {text}" if label else f"{c.exc_type}{where}: {text}"
    if c.frames:
        f = c.frames[-1]
        head += f" (in {f.function}, {f.file.rsplit('/', 1)[-1]}:{f.line})"
    return head


_NOT_PASSED = re.compile(r"Rank (\d+) failed to pass monitoredBarrier")
_STOPPED = re.compile(r"stopped by torchrun \(SIGTERM\): ranks ([\d,]+)")
_JOINED = re.compile(r"(\d+)/(\d+) clients joined")


def timeout_hint(inc: Incident) -> tuple[str, list[int], list[int]]:
    """A collective timeout names the rank that *waited*; the one to look at
    is the rank that never joined. Returns the sentence, the ranks that timed
    out and the suspects: the ranks monitored_barrier names, else those
    torchrun still had to stop (they had not failed: hung, or elsewhere)."""
    waited = sorted(inc.ranks) or ([inc.root.rank] if inc.root.rank is not None else [])
    suspects: list[int] = []
    for crash in [inc.root, *inc.collateral]:
        suspects += [int(r) for r in _NOT_PASSED.findall(crash.message)]
    why = "it failed to pass monitoredBarrier"
    if not suspects and inc.report is not None:
        stopped = _STOPPED.search(inc.report.message)
        if stopped is not None:
            suspects = [int(r) for r in stopped.group(1).split(",") if r]
            why = "still running when torchrun stopped the job"
    suspects = sorted(set(suspects) - set(waited))
    who = "rank " + ",".join(map(str, waited)) if waited else "a rank"
    if suspects:
        them = "rank " + ",".join(map(str, suspects))
        return (f"{who} timed out waiting for another rank; suspect {them} ({why}): what is it doing?",
                waited, suspects)
    joined = _JOINED.search(inc.root.message)
    if joined is not None:
        return (f"only {joined.group(1)} of {joined.group(2)} ranks joined: find the ranks that never started "
                "or could not reach the master", waited, suspects)
    return (f"{who} timed out waiting for another rank: find the rank that did not join (the one whose log "
            "stopped first, or that no timeout names)", waited, suspects)


def incident_alert(inc: Incident, detector: str, cfg: DetectorConfig) -> Alert:
    """The one firing alert of an incident."""
    c = inc.root
    survived = inc.survived is not None and inc.survivable(detector)
    message = describe(c, detector)
    hint: tuple[str, list[int], list[int]] | None = None
    if c.kind == "nccl_timeout":
        hint = timeout_hint(inc)
        message += f"; {hint[0]}"
    if survived:
        message = f"caught and survived (training went on): {message}"
    advice = remedy(detector, c.kind, c.cause)
    if detector == "fx_tracing" and advice:
        message += "\n" + advice
    frames = [f"{f.file}:{f.line} in {f.function}" for f in c.frames[-cfg.crash_frames :]]
    report = inc.report
    evidence = {
        "exc_type": c.exc_type,
        "message": c.message[:2000],
        "signature": inc.signature,
        "kind": c.kind,
        "cause": c.cause,
        "rank": c.rank,
        "ranks": sorted(inc.ranks),
        "count": inc.count,
        "frames": frames,
        "traceback": "\n".join(c.text[-cfg.crash_traceback_lines :])[:8000],
        "thread": c.thread,
        "remedy": advice or None,
        # The other copies' exception types, and the consequences merged in.
        "copies": dict(inc.copies),
        "collateral": [
            {"exc_type": x.exc_type, "kind": x.kind, "cause": x.cause, "rank": x.rank, "source": x.source,
             "message": " ".join(x.message.split())[:300]}
            for x in inc.collateral
        ],
        "report": None if report is None or report is c else {
            "message": report.message[:2000], "rank": report.rank, "source": report.source,
            "kind": report.kind, "cause": report.cause,
        },
        "survived": inc.survived if survived else None,
    }
    if hint is not None:
        evidence["timed_out_ranks"], evidence["suspect_ranks"] = hint[1], hint[2]
    garbled = garbled_line(c.exc_type, c.text) if c.frames else None
    if garbled is not None:
        # Another process wrote into the exception line (a rank printing as
        # this one died): type and message were recovered from it, or not.
        evidence["garbled"] = garbled
    return Alert(
        time=c.time,
        detector=detector,
        state="firing",
        # Ctrl-C is the user's own hand, a caught traceback the program's:
        # worth a line, not a red alarm.
        severity="warning" if c.cause == "keyboard_interrupt" or survived else "critical",
        message=message,
        source=c.source,
        gpu=None,
        kind=c.kind if detector == "crash" else None,
        evidence=evidence,
        rank=c.rank,
    )
