"""Training-health lines: fp16 overflows, heartbeats, eval/checkpoint phases, Xid errors.

Four families of log line that are not progress but tell the detectors how
the run is (issue 19):

* ``overflow_line``: fp16 dynamic loss scaling skipped a step (DeepSpeed,
  apex, the apex-derived FP16_Optimizer of older Megatron, fairseq);
* ``heartbeat_line``: a watchdog or heartbeat repeating the last step and
  saying where a rank waits. Such a line is NOT progress: read as one it
  would delay the stall by a minute each time it is printed;
* ``phase_line``: the run entered (or left) evaluation or checkpointing,
  which legitimately print no step for a while. HF Trainer's eval bar has
  no name and cannot be told from its training bar: its "***** Running
  Evaluation *****" (logged at INFO) and its ``eval_loss`` dict mark the
  phase instead. A phase with no end marker ends at the next training
  step (the stall detector's business);
* ``xid_line``: the kernel's ``NVRM: Xid`` line of a failing GPU.

Like ``parsers.padding``, this module only says which lines are which: the
stream finds candidates by ``LITERALS`` among its other literals (one C
search over the chunk) and, since lines of one shape differ only in their
digits and these patterns never depend on a digit's value, tests the
patterns once per line shape (``parsers.stream``). ``health_line`` is the
one entry the stream calls; it returns the event (undated: the stream dates
it like any event line) and whether the line must not be read as progress.

Every reader here takes the text after the line's rank prefixes and the
prefix's rank, as the stream split them once (``parsers.ranks``). One rule
for the rank: the prefix's, else (overflow and heartbeat lines, which name
their rank in words: "OVERFLOW! Rank 0 Skipping step") the ``Rank N`` the
text names; a phase marker has only its prefix's.

>>> health_line("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768")
(Overflow(time=0.0, source='', rank=0, scale=65536.0, new_scale=32768.0), False)
>>> health_line("heartbeat: still at step 537", 3)[0].rank
3
>>> health_line("no step for 60 s (last step 537), waiting in all_reduce")
(Heartbeat(time=0.0, source='', rank=None, last_step=537, waiting_in='all_reduce'), True)
>>> health_line("step 537 | loss 2.31 | loss scale: 65536.0") is None
True
"""

from __future__ import annotations

import re
from typing import Union

from .events import Heartbeat, Overflow, Phase, XidError

HealthEvent = Union[Overflow, Heartbeat, Phase, XidError]  # noqa: UP007 - like events.Event

# Every line of a family holds one of its literals (the stream's candidates).
# Few and short: without Hyperscan each new anchor character is one more
# regex pass over every chunk (``parsers.scanner``); a literal that holds a
# progress literal ("tep", "loss") adds no pass at all.
OVERFLOW_LITERALS = ("verflow", "kipping step")
HEARTBEAT_LITERALS = ("last step", "still at step", "stuck at step", "last_step")  # _LAST_STEP's words
PHASE_LITERALS = ("Running Evaluation", "eval metrics", "eval_loss", "heckpoint", "Validation")
XID_LITERALS = ("NVRM: Xid",)
LITERALS = OVERFLOW_LITERALS + HEARTBEAT_LITERALS + PHASE_LITERALS + XID_LITERALS

_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"

# -- overflow -----------------------------------------------------------------
# "[deepspeed] OVERFLOW! Rank 0 Skipping step." (+ " Attempted loss scale: X, reducing to Y"),
# "[deepspeed] fp16 dynamic loss scale overflow! [Rank N ]Skipping step.",
# "OVERFLOW! Skipping step." (apex FP16_Optimizer, older Megatron),
# "[Rank 0] Overflow detected. Skipping step." (DeepSpeed fused optimizer),
# "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to X" (apex amp),
# "Grad overflow on iteration[:] N" (DeepSpeed/apex loss scalers, verbose),
# "NOTE: overflow detected, setting loss scale to: X" (fairseq).
_OVERFLOW = re.compile(
    r"(?:OVERFLOW!|overflow!|[Oo]verflow(?: detected)?[.!,]?)\s+(?:Rank [0-9]+\s+)?[Ss]kipping step"
    r"|(?P<iter>Grad overflow on iteration:?\s+[0-9]+)"
    r"|overflow detected, setting loss scale"
)
_SCALE = re.compile(r"Attempted loss\s+scale:\s*" + _NUM)
_NEW_SCALE = re.compile(
    r"(?:[Rr]educing (?:loss scale )?to|reduces to|setting loss scale to):?\s*" + _NUM
)
_RANK = re.compile(r"\b[Rr]ank\s*[:=]?\s*([0-9]+)\b")

# -- heartbeat ----------------------------------------------------------------
# The line must say the rank is idle, and name the step it is stuck at in
# words that cannot be a progress line's own ("at step 5: loss 2.1" can).
_IDLE = re.compile(
    r"no step for|[Hh]eartbeat|still at step|stuck at step|[Ww]aiting (?:in|for|on|at)\b"
)
_LAST_STEP = re.compile(r"(?:last|still at|stuck at)[ _]step\s*[:=]?\s*([0-9]+)|last_step\s*[:=]\s*([0-9]+)")
_WAITING_IN = re.compile(r"[Ww]aiting (?:in|for|on|at) (?:the )?([A-Za-z_](?:[\w.:]*\w)?)")

# -- phases -------------------------------------------------------------------
# (pattern, phase, begin)
_PHASES: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"\*+ Running Evaluation \*+"), "eval", True),  # HF Trainer
    (re.compile(r"\*+ eval metrics \*+"), "eval", False),  # HF trainer.log_metrics("eval", ...)
    (re.compile(r"""['"]eval_loss['"]\s*:"""), "eval", False),  # HF's eval metrics dict
    # Lightning's validation bar: "Validation DataLoader 0:  50%|", "Validation: |"
    (re.compile(r"(?:^|[\r\]>:] ?)\s*Validation(?: DataLoader [0-9]+)?:\s+(?:[0-9]+%)?\|"), "eval", True),
    (re.compile(r"Saving model checkpoint(?: to|:) \S"), "checkpoint", True),  # HF, DeepSpeed engine
    (re.compile(r"\[Torch\] Checkpoint \S+ is (?:about to be saved|begin to save)"), "checkpoint", True),
    (re.compile(r"\[Torch\] Checkpoint \S+ is ready now"), "checkpoint", False),  # DeepSpeed commit
    (re.compile(r"Finished saving the checkpoint"), "checkpoint", False),  # torchtitan (DCP)
    (re.compile(r"(?<![Ff]inished )[Ss]aving the checkpoint"), "checkpoint", True),  # torchtitan (DCP)
    (re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+[0-9]+"), "checkpoint", False),  # Megatron
    (re.compile(r"(?<!successfully )saving checkpoint at iteration\s+[0-9]+ to"), "checkpoint", True),  # Megatron
)

# -- Xid ----------------------------------------------------------------------
# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\):\s*([0-9]+),?\s*(.*?)\s*$")
_XID_NOISE = re.compile(r"^(?:pid=[^,]*,\s*)?(?:name=[^,]*,\s*)?")


def _named_rank(text: str, rank: int | None) -> int | None:
    """``rank`` (the prefix's), else the ``Rank N`` that ``text`` names
    ("Rank 0 Skipping step", "[Rank 0] Overflow detected"; not apex's
    "loss scaler 0")."""
    if rank is None:
        m = _RANK.search(text)
        if m is not None:
            rank = int(m.group(1))
    return rank


def overflow_line(line: str, rank: int | None = None) -> Overflow | None:
    """An fp16 loss-scale overflow (a skipped step), or None.

    >>> overflow_line("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0")
    Overflow(time=0.0, source='', rank=None, scale=None, new_scale=32768.0)
    >>> overflow_line("iteration 10 | lm loss: 5.0E+00 | loss scale: 65536.0 |") is None
    True
    """
    if _OVERFLOW.search(line) is None:
        return None
    rank = _named_rank(line, rank)
    m = _SCALE.search(line)
    scale = float(m.group(1)) if m is not None else None
    m = _NEW_SCALE.search(line)
    new_scale = float(m.group(1)) if m is not None else None
    return Overflow(0.0, "", rank, scale, new_scale)


def heartbeat_line(line: str, rank: int | None = None) -> Heartbeat | None:
    """A line that repeats the last step and says the rank waits, or None.

    >>> heartbeat_line("heartbeat: still at step 537, waiting in all_reduce", 3)
    Heartbeat(time=0.0, source='', rank=3, last_step=537, waiting_in='all_reduce')
    >>> heartbeat_line("Waiting for dataset download to complete...") is None
    True
    """
    if _IDLE.search(line) is None:
        return None
    m = _LAST_STEP.search(line)
    if m is None:
        return None  # a wait that names no step says nothing of the training loop
    w = _WAITING_IN.search(line)
    return Heartbeat(0.0, "", _named_rank(line, rank), int(m.group(1) or m.group(2)), w.group(1) if w is not None else None)


def phase_line(line: str, rank: int | None = None) -> Phase | None:
    """An evaluation or checkpoint marker, or None.

    >>> phase_line("***** Running Evaluation *****")
    Phase(time=0.0, source='', phase='eval', begin=True, rank=None)
    >>> phase_line("Step 01000 | Validation bpb: 0.9992") is None
    True
    """
    for pattern, phase, begin in _PHASES:
        if pattern.search(line) is not None:
            return Phase(0.0, "", phase, begin, rank)
    return None


def xid_line(line: str) -> XidError | None:
    """The kernel's Xid line (dmesg, journal or syslog form), or None.

    >>> xid_line("[12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.")
    XidError(time=0.0, code=79, gpu=None, message='GPU has fallen off the bus.', pci_bus='0000:3b:00', source='')
    """
    m = _XID.search(line)
    if m is None:
        return None
    message = _XID_NOISE.sub("", m.group(3), count=1)
    return XidError(0.0, int(m.group(2)), None, message, m.group(1), "")


def health_line(line: str, rank: int | None = None) -> tuple[HealthEvent, bool] | None:
    """The health event of ``line`` (time 0, no source) and whether the line
    must not also be read as progress, or None. ``line``: the text after
    the rank prefixes; ``rank``: theirs (the stream's one split).

    A heartbeat repeats a step; "Grad overflow on iteration N" names the
    scaler's iteration; a checkpoint or eval marker line ("saving checkpoint
    at iteration 100") names the step it is at. None of them is a new step.
    A validation bar may share its line with the training bar's redraws, and
    apex's overflow line often follows a tqdm bar on the same line: those
    keep their progress.
    """
    alone = "\r" not in line  # a line of tqdm redraws keeps its training states
    if "NVRM: Xid" in line:
        xid = xid_line(line)
        if xid is not None:
            return xid, alone
    if "verflow" in line or "kipping step" in line:
        overflow = overflow_line(line, rank)
        if overflow is not None:
            return overflow, alone and "overflow on iteration" in line
    phase = phase_line(line, rank)
    if phase is not None:
        return phase, alone and "Validation" not in line
    heartbeat = heartbeat_line(line, rank)
    if heartbeat is not None:
        return heartbeat, alone
    return None
