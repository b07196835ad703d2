"""The alert type and the small pieces every detector shares.

A detector is one small class with a bounded state:

* ``update(event) -> list[Alert]`` takes any event (it ignores the ones it
  does not care about) and returns the alerts that event caused;
* ``accepts`` names the event types it wants (the set sends it no other),
  and ``routes()`` the handler of each: ``update``, or for the types of
  every step a method of its own (``fast_routes``) that does the same
  without type tests (``tests/core/test_detector_routes.py`` holds them to
  it);
* ``deadline() -> float | None`` says the earliest data time at which a
  ``Tick`` could make it fire although no data arrived (a stall), so that a
  replay can insert exactly the ticks that matter instead of one per second;
* ``quiet_steps(steps)`` is the batching contract (issue 20): a run of step
  lines that provably changes no alert is taken in one go (see
  ``StepCommit``); a detector that cannot tell says None and gets them one
  at a time.

Detectors never read a clock: "now" is always the time of the event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..parsers.events import (
    Crash,
    Delivery,
    Event,
    GpuLost,
    GpuSample,
    Heartbeat,
    Overflow,
    PaddingReport,
    Phase,
    ProbeSample,
    ProcessExit,
    Progress,
    Quiet,
    Recompile,
    Renumbered,
    Tick,
    XidError,
)

DETECTORS = (
    "memory_volatility",
    "memory_growth",
    "memory_pressure",
    "throughput_drop",
    "stall",
    "fx_tracing",
    "crash",
    "recompile",
    "padding",
    "process_exit",
    # Additions of issue 11 (CONTRACTS only adds names):
    "alloc_thrash",
    # Additions of issue 19:
    "loss",
    "straggler",
    "gpu_health",
)
SEVERITIES = ("info", "warning", "critical")
STATES = ("firing", "resolved")
# The same two vocabularies as types (CONTRACTS section 2): a typo in a
# detector's severity is a type error, not an alert nobody can route.
Severity = Literal["info", "warning", "critical"]
State = Literal["firing", "resolved"]
# How a detector takes one event type: ``update`` itself, or a method made
# for that type (no type tests on the hot path). Typed ``Any`` in: each
# handler is called only with the type it is routed.
Handler = Callable[[Any], "list[Alert]"]
# The batching contract (issue 20). ``quiet_steps(steps)`` is offered a run
# of consecutive step lines (``Progress``, nothing else between them, as the
# per-event path would hand them to the detector's Progress route, in that
# order; their times need not be sorted: ranks interleave). It answers
# None, having changed nothing at all, unless it can prove that feeding
# them one at a time would (a) return no alert and (b) leave its
# ``deadline()`` after each ``steps[:i]`` at or after ``steps[i].time``
# (None counting as never) for every i >= 1, so that no Tick would fall
# inside the run. Otherwise it answers a ``StepCommit``: called once, right
# after, with nothing fed in between, it leaves the detector exactly as the
# steps fed one at a time would (every field a later alert, ``deadline()``
# or a read accessor depends on). The set offers a run only when every
# detector of the Progress route proves it quiet, and commits them all;
# else it feeds the run one step at a time. A quiet run has no alert to
# interleave, and nothing outside a detector reads its state mid-run, so the
# alerts and states are those of the per-event path.
StepCommit = Callable[[], None]
# After a refusal, ``refused_at(steps)`` may say where the run turns for
# the detector that refused it: the place of the first step it could not
# prove quiet (the steps before it it could, on their own). A hint for
# where to cut the run, nothing more: the set offers the part before it to
# every detector again and feeds that step one at a time, so a wrong hint
# costs time, never an alert. None: it cannot tell (the run is halved).
# Every event type a detector can be sent; the default of ``accepts``.
EVENT_TYPES: tuple[type[Event], ...] = (
    Progress, Crash, Recompile, GpuSample, GpuLost, ProcessExit, Tick, Quiet, ProbeSample, PaddingReport, Delivery,
    Overflow, Heartbeat, Phase, XidError, Renumbered,
)


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert line of CONTRACTS section 2."""

    time: float
    detector: str
    state: State
    severity: Severity
    message: str
    source: str
    gpu: int | None = None
    kind: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    # The rank the alert is about (CONTRACTS section 2, added), or None.
    rank: int | None = None

    @property
    def key(self) -> tuple[str, int | None, str | None]:
        """What makes two alerts the same episode (firing then resolved).

        No ``rank``: a detector holds one ``Episode`` per kind, so two ranks
        never fire the same (detector, kind) at once (straggler's ``slow``
        names a second rank only after the first resolved; ``hung`` is
        another kind), and one rank's resolve must close its firing."""
        return (self.detector, self.gpu, self.kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": round(self.time, 6),
            "detector": self.detector,
            "state": self.state,
            "severity": self.severity,
            "gpu": self.gpu,
            "kind": self.kind,
            "rank": self.rank,
            "message": self.message,
            "source": self.source,
            "evidence": _jsonable(self.evidence),
        }

    def to_json(self) -> str:
        """One alert line. Messages and evidence quote the log, and the log is
        data: a raw ESC or CSI (``\\x1b[31m``, ``\\x9b``) in it would take effect
        in the terminal or log viewer showing the line. ``json`` escapes
        U+0000-U+001F itself; the rest of C0/C1 (U+007F-U+009F) and the two
        Unicode line separators (which ``str.splitlines`` splits on) are
        escaped here, in keys and values alike. Other characters stay
        readable (``ensure_ascii=False``)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(", ", ": ")).translate(_ESCAPES)


# Outside a JSON string these characters cannot occur, so escaping them in
# the whole text escapes them in every string (keys included) and nowhere else.
_ESCAPES = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), 0x2028, 0x2029)}


def _jsonable(value: Any) -> Any:
    """Evidence may hold tuples and non-finite floats; JSON lines may not."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class Detector(Protocol):
    """Everything ``DetectorSet`` and the Monitor use of a detector.

    Each member is declared so that no caller needs ``getattr`` defaults;
    ``DetectorBase`` gives the usual ones.
    """

    # Unique in a set: ``DetectorSet.get`` and the alerts' ``detector``.
    name: str
    # Read-only here, so that a class may declare a narrower tuple.
    @property
    def accepts(self) -> tuple[type[Event], ...]:
        """The event types ``update`` cares about; the set routes only these."""
        ...

    @property
    def timed(self) -> bool:
        """False: ``deadline()`` is always None, so the set never asks it."""
        ...

    def update(self, event: Event) -> list[Alert]: ...

    def routes(self) -> Mapping[type[Event], Handler]:
        """Per accepted event type, the handler ``DetectorSet`` calls: the
        same alerts and state as ``update`` on that type. A detector gives
        its own for the types of every step (``Progress``) so that the set's
        precomputed table, not a chain of type tests, picks the code."""
        ...

    def deadline(self) -> float | None: ...

    def flush(self) -> list[Alert]: ...

    def set_baseline(self, value: float | None, /) -> None: ...

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """A run of step lines taken at once, if provably quiet (``StepCommit``)."""
        ...

    def refused_at(self, steps: Sequence[Progress], /) -> int | None:
        """Where a run it refused turns (see ``StepCommit``'s hint), or None."""
        ...


class DetectorBase:
    """The defaults of ``Detector``: sees every event, may have a deadline,
    holds no alerts back and judges against no baseline figure."""

    name: str
    accepts: tuple[type[Event], ...] = EVENT_TYPES
    timed: bool = True

    def update(self, event: Event) -> list[Alert]:
        raise NotImplementedError

    def routes(self) -> Mapping[type[Event], Handler]:
        """``update`` for every accepted type, unless a detector says better
        (``fast_routes``: the types it has a handler of its own for)."""
        table: dict[type[Event], Handler] = {t: self.update for t in self.accepts}
        for etype, handler in self.fast_routes().items():
            if etype not in table:
                raise TypeError(f"{type(self).__name__} routes {etype.__name__}, which it does not accept")
            table[etype] = handler
        return table

    def fast_routes(self) -> Mapping[type[Event], Handler]:
        """The accepted types with a handler of their own (none by default)."""
        return {}

    def deadline(self) -> float | None:
        return None

    def flush(self) -> list[Alert]:
        """The data ended: the alerts held back (none by default)."""
        return []

    def set_baseline(self, value: float | None, /) -> None:
        """Judge from now on against the good run's figure (none by default)."""

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """None: this detector takes step lines one at a time (the default;
        see ``StepCommit`` for what a detector that batches them must prove)."""
        return None

    def refused_at(self, steps: Sequence[Progress], /) -> int | None:
        """No hint where a refused run turns (the default: it is halved)."""
        return None


class Episode:
    """Fire once when a condition starts, resolve once when it ends.

    Keeps the two-state machine out of every detector so that "one episode
    fires once, not once per line or sample" holds by construction.
    """

    __slots__ = ("detector", "gpu", "kind", "active", "since", "fired_alert")

    def __init__(self, detector: str, gpu: int | None = None, kind: str | None = None) -> None:
        self.detector = detector
        self.gpu = gpu
        self.kind = kind
        self.active = False
        self.since: float | None = None
        self.fired_alert: Alert | None = None

    def fire(
        self,
        time: float,
        severity: Severity,
        message: str,
        source: str,
        evidence: dict[str, Any] | None = None,
        rank: int | None = None,
    ) -> list[Alert]:
        """``rank``: the rank the alert is about (its resolution carries it too)."""
        if self.active:
            return []
        self.active = True
        self.since = time
        alert = Alert(
            time=time,
            detector=self.detector,
            state="firing",
            severity=severity,
            message=message,
            source=source,
            gpu=self.gpu,
            kind=self.kind,
            evidence=evidence or {},
            rank=rank,
        )
        self.fired_alert = alert
        return [alert]

    def resolve(
        self,
        time: float,
        message: str,
        source: str,
        evidence: dict[str, Any] | None = None,
    ) -> list[Alert]:
        if not self.active:
            return []
        self.active = False
        fired = self.fired_alert
        self.fired_alert = None
        if self.since is not None and time < self.since:
            # Never before it fired: a stall fired at a tick and resolved by
            # a step from a late burst of a block-buffered log carried the
            # step's older stamp (a webhook's endsAt before its startsAt).
            time = self.since
        self.since = None
        return [
            Alert(
                time=time,
                detector=self.detector,
                state="resolved",
                severity=fired.severity if fired else "info",
                message=message,
                source=source,
                gpu=self.gpu,
                kind=self.kind,
                evidence=evidence or {},
                rank=fired.rank if fired else None,
            )
        ]
