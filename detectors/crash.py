"""crash and fx_tracing: a fatal traceback or error, one alert per incident.

An *incident* is everything one failure prints. In a torchrun job that is
the root-cause rank's traceback; the same traceback from other ranks
(copies); the consequences on the surviving ranks ("Connection closed by
peer", NCCL watchdog timeouts, ``terminate called after throwing``); the
agent's ``Sending process N closing signal SIGTERM`` to the siblings and its
``failed (exitcode: 1)`` line; and torch elastic's ChildFailedError report.
All of it is ONE alert whose message is the root cause (the first failing
crash that is not a consequence), with the rest in its evidence.

- *Copies*: the same signature, or the same exception type and message up
  to its numbers (interleaved ranks garble signatures), within
  ``crash_dedupe_s`` of the incident's first crash, and never across a
  restart: when the progress lines between the two show a program running
  (a relaunch starting again at step 0, or two lines of a stream after the
  crash that did not prove it survived; ``crash_incident.restarted``), the
  second crash is an incident of its own, so a crash loop alerts each time;
  and a consequence worded like the first attempt's (torch elastic's
  ``failed (exitcode: 1)`` again) is the relaunch's crash's, not the first's.
- *Consequences* (``parsers.signatures.COLLATERAL_CAUSES``, an NCCL
  timeout, the report): join the most recent incident within the window; with
  none they start one themselves (a report or a watchdog timeout may be
  all a log holds). A root-worthy crash that arrives while such an incident
  is still held becomes its root; so does a collective timeout that arrives
  after only torchrun's own lines or its report (``crash_incident.weight``:
  a rank's traceback is held until its end is known). ``WEAK_CAUSES`` never
  alert on their own.
- The alert is held for ``crash_hold_s`` of data time from the moment the
  first crash *arrived* (the detector's clock: the latest event time seen;
  a crash's own time may be a stale timestamp of a log that stamps only
  some lines), so the copies' ranks are in the evidence. A ``Quiet`` (live:
  no log is growing) ends that hold at once: the copies are in. Only a
  verdict still open waits (next paragraph), at most ``SURVIVE_WINDOW_S``.
  ``flush()`` at the end of the data sends the rest. Copies and
  consequences arriving after the alert was sent, within the window,
  update the incident (``episodes()``) without a new alert.

Caught tracebacks, decided so that live and replay agree: a ``crash``
incident whose root is a Python traceback (frames; not a signal, a
segfault or a consequence) and that no consequence joined is *survived*
when two progress lines of the same file and rank follow the exception
line (one is not enough: tqdm redraws its bar once more when a dying
process closes it), each naming a later step than that stream reported
before the crash (a relaunch into the same file starts again lower), with
data times within ``SURVIVE_WINDOW_S`` of the incident's arrival. Then it
is a warning, not critical. The verdict reads only data times and line
order, so chunk boundaries do not change it; and a Quiet does not either:
it ends the rank-merge hold but never the survival window, so a progress
line inside the window is always weighed before the alert leaves.

A critical traceback whose stream reaches later steps after all (after the
window: slow steps) was caught too: its signature is learned, and a
repeat gets ``KNOWN_CAUGHT_WINDOW_S`` for its progress. Every survived
repeat of a signature adds to its first episode instead of alerting, and at
most ``SURVIVED_ALERTS_MAX`` survived warnings are ever sent, so the firing
alerts stay bounded however many arrive over days.

One instance watches one detector name (``crash`` or ``fx_tracing``);
fx_tracing incidents are never "survived": a tracing collision kills the
thread it hits, whatever the others do.

Step lines are most of what the two see and change little: both hand them
to one shared record (``crash_steps.StepLines``, an append each), and only
``crash`` weighs them, only while an incident is held or a stream watched.
A run of them is taken at once (``quiet_steps``) unless one could reach a
held incident's deadline.
"""

from __future__ import annotations

import functools
from collections import OrderedDict, deque
from collections.abc import Sequence

from ..parsers.events import Crash, Event, Progress, Quiet, Renumbered, Tick
from .base import Alert, DetectorBase, Handler, StepCommit
from .config import DetectorConfig
from .crash_incident import (
    PROOF_LINES,
    CrashEpisode,
    Incident,
    ends_workers,
    is_collateral,
    is_report,
    may_promote,
    message_key,
    restarted,
    same_class,
    signature_of,
    stream_of,
    weigh,
    weight,
)
from .crash_steps import LINES_KEEP, STREAMS_MAX, Lines, StepLines, StreamKey, where
from .crash_text import KIND_LABELS, describe, incident_alert

__all__ = ["CrashDetector", "CrashEpisode", "KIND_LABELS", "describe", "message_key", "signature_of"]

# Survived (caught) tracebacks: at most this many warnings over the
# detector's life, and this many signatures remembered to fold repeats into.
SURVIVED_ALERTS_MAX = 32
_SURVIVED_KEEP = 256
_INF = float("inf")
# Bounds of the detector's memory.
_KEYS_MAX = 256
_PAST_KEEP = 32
_WATCH_KEEP = 8
# Progress of the crash's own stream within this long (data time) after the
# crash was first seen means the program caught it and went on. Short: a
# crash that ends a live log is an alert this soon after its Quiet.
# ``DetectorConfig.crash_survive_s``; this is its default.
SURVIVE_WINDOW_S = DetectorConfig().crash_survive_s
# A signature the program already survived once gets this long for its next
# progress (slow steps): a repeat then adds to that episode, no new alert.
# ``DetectorConfig.crash_caught_window_s``; this is its default.
KNOWN_CAUGHT_WINDOW_S = DetectorConfig().crash_caught_window_s
# A consequence this few lines after an incident's last line in the same
# file joins it whatever the stamps say (one torchrun report, a few ranks'
# tracebacks).
_LINE_WINDOW = 300


class CrashDetector(DetectorBase):
    accepts = (Crash, Tick, Quiet, Progress, Renumbered)
    timed = True  # deadline() can be set: the set asks it after each event it gets

    def __init__(self, config: DetectorConfig | None = None, name: str = "crash", *,
                 steps: StepLines | None = None) -> None:
        self.config = config or DetectorConfig()
        self.name = name
        self._open: OrderedDict[str, Incident] = OrderedDict()
        self._recent: deque[Incident] = deque(maxlen=_PAST_KEEP)
        self._past: deque[Incident] = deque(maxlen=_PAST_KEEP)
        self._held: list[Incident] = []
        # Signatures known to be caught (survived once): their first episode.
        self._survived: OrderedDict[str, Incident] = OrderedDict()
        self._survived_alerts = 0
        # (file, rank) -> critical survivable incidents not yet proven fatal.
        self._watch: dict[tuple[str, int | None], list[Incident]] = {}
        # (file, rank) -> its last few progress lines as (line, step, time):
        # survival of a caught traceback, and a restart between two crashes.
        # Shared by the two crash detectors of a set, each line recorded once
        # (``crash_steps``): it reads them only on a Crash, after both have
        # been sent every earlier step line (``_progress``).
        self._steps = steps if steps is not None else StepLines()
        # file -> its last lines where torch elastic said a worker group was
        # gone, as (line, its report?): ``crash_incident.restarted``.
        self._ends: OrderedDict[str, deque[tuple[int, bool]]] = OrderedDict()
        # The latest time of the other events it got; with the step lines'
        # (``StepLines.latest``), its clock (``_now``).
        self._clock = float("-inf")
        # The earliest deadline of the held incidents (inf: none held), set
        # by ``_rehold`` wherever one is held, released or its deadline
        # moves: the set asks ``deadline()`` after every step line, and a
        # step line releases nothing before it.
        self._due = _INF

    def deadline(self) -> float | None:
        due = self._due
        return None if due == _INF else due

    @property
    def _progress(self) -> OrderedDict[StreamKey, Lines]:
        """(file, rank) -> its last step lines (``StepLines.seen``)."""
        return self._steps.seen

    def _now(self) -> float:
        """The detector's clock: the latest event time seen (a step line's
        from the shared record: a step line is an append, a run one extend)."""
        latest = self._steps.latest
        return latest if latest > self._clock else self._clock

    def _rehold(self) -> None:
        """Re-read ``_due`` after the held incidents or their deadlines changed."""
        self._due = min([inc.deadline for inc in self._held], default=_INF)

    def episodes(self) -> list[CrashEpisode]:
        """The recent incidents, oldest first, with every rank seen so far."""
        return [inc.snapshot(self.name) for inc in self._past if inc.alert is not None]

    def flush(self) -> list[Alert]:
        """The data ended: send every held alert now."""
        out: list[Alert] = []
        for inc in list(self._held):
            out.extend(self._send(inc))
        self._held.clear()
        self._due = _INF
        return out

    # -- events ---------------------------------------------------------------

    def fast_routes(self) -> dict[type[Event], Handler]:
        return {Progress: self._on_progress}

    def _on_progress(self, p: Progress) -> list[Alert]:
        # Once per training step: an append (the second crash detector of a
        # set is answered from the first's; ``crash_steps``). fx_tracing
        # keeps progress only to tell a relaunch apart; crash weighs it
        # only while an incident is held or a stream watched.
        self._steps.add(p)
        if self.name == "crash" and (self._held or self._watch):
            key, line = where(p)
            self._weigh_step(key, line, p)
        t = p.time
        return self._release(t) if t >= self._due else []

    def update(self, event: Event) -> list[Alert]:
        if type(event) is Progress:
            return self._on_progress(event)
        if isinstance(event, Renumbered):  # (moves no clock: the Monitor's time, not the data's)
            self._renumbered(event.source)
            return []
        t = event.time
        if t > self._clock:
            self._clock = t
        if isinstance(event, Tick):
            # (Nothing held: nothing to release, whatever the clock says.)
            if not self._held:
                return []
            now = self._now()
            return self._release(now) if now >= self._due else []
        if isinstance(event, Quiet):
            return self._quiet() if self._held else []
        if not isinstance(event, Crash) or event.detector != self.name:
            return []
        now = self._now()
        out = self._release(now) if now >= self._due else []
        self._merge(event, now)
        self._rehold()
        if self.config.crash_hold_s <= 0:
            out.extend(self._release(now))
        return out

    def _renumbered(self, file: str) -> None:
        """``file``'s lines are counted from 1 again (truncated, made anew,
        rotated): what was kept of its lines by their numbers is another
        file's now. Its step lines and torch elastic's ends go (a relaunch
        that crashes on line 5 is no survivor of the run whose steps stood
        on lines 90-105); its incidents keep their verdicts, but their
        lines are no longer compared with the new ones (``Incident.renumbered``),
        and no later step of it proves them caught."""
        self._steps.forget(file)
        self._ends.pop(file, None)
        for key in [key for key in self._watch if key[0] == file]:
            del self._watch[key]
        for inc in {id(inc): inc for inc in (*self._recent, *self._open.values(), *self._held)}.values():
            inc.renumbered(file)

    def _weigh_step(self, key: StreamKey, line: int, p: Progress) -> None:
        """One step line of stream ``key`` as evidence that a crash was
        survived: a held incident's verdict, a watched one learned caught.
        Moves a held incident's deadline only to its merge hold's end
        (``_survives``), never sends: ``quiet_steps`` relies on both."""
        if self._held:
            for inc in self._held:
                # The stream first: a tuple compare, where most held
                # incidents of a many-rank job part.
                if inc.stream == key and inc.survived is None and inc.survivable(self.name):
                    weigh(inc, line, p.step, p.time <= inc.window_end)
                    if inc.proof >= PROOF_LINES:
                        self._survives(inc, p.source)
        watched = self._watch.get(key)
        if watched:
            # Critical crashes of this stream the program lived through after
            # all (its steps went on later than the window): their signature
            # is a known caught one from now on. (A crash before any step is
            # a start-up failure: later steps are a relaunch's.)
            for inc in watched:
                if inc.base_step is not None:
                    weigh(inc, line, p.step, False)
                    if inc.proof_late >= PROOF_LINES:
                        self._learn_caught(inc)
            self._watch[key] = [
                inc for inc in watched if inc.signature not in self._survived and not inc.disproved
            ]

    def quiet_steps(self, steps: Sequence[Progress], /) -> StepCommit | None:
        """A run of step lines taken at once (``base.StepCommit``): quiet
        unless one reaches a held incident's deadline, or the end of its
        merge hold (where a proof of survival in the run would move that
        deadline). Step lines send nothing else and move no other deadline
        (``_weigh_step``). Nothing held, nothing watched (or fx_tracing):
        the commit is the shared record's one ``extend`` (``StepLines.add_run``;
        the clock of step lines is kept there, ``_now``)."""
        if self._steps.recorded(steps):
            return None  # a line recorded before: one at a time, as ``add`` dedupes
        if self._held and self._past_bound(steps) is not None:
            return None
        if self.name == "crash" and (self._held or self._watch):
            return functools.partial(self._commit_steps, steps)
        return functools.partial(self._steps.add_run, steps)

    def _past_bound(self, steps: Sequence[Progress]) -> int | None:
        """With incidents held, the first step at or past the time every
        step of a run must come before (the earliest held deadline, or the
        end of a merge hold, where a proof of survival in the run would move
        that deadline); a NaN time counts as past (the set would tick
        before it). None: every step comes before it."""
        bound = self._due
        if self.name == "crash":
            hold = self.config.crash_hold_s
            for inc in self._held:
                if inc.survived is None and inc.survivable(self.name):
                    bound = min(bound, inc.arrival + hold)
        for i, p in enumerate(steps):
            if not p.time < bound:
                return i
        return None

    def refused_at(self, steps: Sequence[Progress], /) -> int | None:
        """Where a run refused for a held incident turns (``_past_bound``);
        no hint for a line recorded before."""
        if not self._held or self._steps.recorded(steps):
            return None
        return self._past_bound(steps)

    def _commit_steps(self, steps: Sequence[Progress]) -> None:
        """``_on_progress`` of each of ``steps`` in turn, proved quiet, for
        a crash detector that weighs them (an incident held, a stream
        watched)."""
        self._steps.add_run(steps)
        for p in steps:
            key, line = where(p)
            self._weigh_step(key, line, p)

    def _merge(self, c: Crash, now: float) -> None:
        inc: Incident | None
        window = self.config.crash_dedupe_s
        t = c.time
        while self._open:
            inc = next(iter(self._open.values()))
            if t - inc.first_time <= window:
                break
            self._open.popitem(last=False)
        if ends_workers(c):
            file, _, line = stream_of(c)
            ends = self._ends.get(file)
            if ends is None:
                ends = self._ends[file] = deque(maxlen=LINES_KEEP)
                if len(self._ends) > STREAMS_MAX:
                    self._ends.popitem(last=False)
            ends.append((line, is_report(c)))
        sig = signature_of(c)
        alias = message_key(c)
        inc = self._open.get(sig) or self._open.get(alias)
        if inc is not None and is_collateral(c) and self._recent and self._recent[-1] is not inc and (
            self._restarted(inc, self._recent[-1].root)
        ):
            # The agent's line after a relaunch's crash (``failed (exitcode:
            # 1)`` again, word for word but its pid): that crash's, not the
            # first attempt's it reads like.
            inc = None
        if inc is not None and t - inc.first_time <= window and not self._restarted(inc, c):
            if is_collateral(c):
                inc.add_collateral(c)  # another rank's copy of a consequence
            else:
                inc.add_copy(c)
            return
        recent = self._latest(c, by_lines=is_collateral(c))
        if recent is not None and self._restarted(recent, c):
            recent = None  # a relaunch's crash: an incident of its own
        if recent is not None and same_class(recent.root, c):
            recent.add_copy(c)  # garbled copies of one error interleave differently
            self._remember(recent, sig, alias)
            return
        if is_collateral(c):
            if (
                recent is not None and not recent.sent and recent.root_collateral
                and weight(c) > weight(recent.root) and (recent.silent or may_promote(recent, c))
            ):
                # Only the agent's own lines or its report so far (a rank's
                # traceback is held until its end is known): a consequence
                # that says more (a collective timeout) names it.
                recent.promote(c, sig)
                self._remember(recent, sig, alias)
                return
            if recent is not None:
                recent.add_collateral(c)
                self._remember(recent, sig, alias)
                return
        elif recent is not None and not recent.sent and (
            (recent.root_collateral and may_promote(recent, c))
            or (c.kind == "host_oom" and recent.root.kind == "killed")
        ):
            # The root cause after its consequences (or the OOM killer's line
            # that explains a SIGKILL): it names the incident.
            recent.promote(c, sig)
            self._remember(recent, sig, alias)
            return
        known = self.name == "crash" and sig in self._survived
        window = self.config.crash_caught_window_s if known else self.config.crash_survive_s
        inc = Incident(c, sig, max(t, now), self.config.crash_hold_s, window)
        inc.known = known
        if not inc.survivable(self.name):
            inc.window_end = inc.arrival  # no verdict to wait for
            inc.deadline = inc.arrival + self.config.crash_hold_s
        if not inc.root_collateral and self.name == "crash":
            # A progress line of its stream already read (events of one
            # chunk come sorted by time, a survivor's next line may be first).
            file, rank, line = stream_of(c)
            seen = self._progress.get((file, rank)) or ()
            steps = [step for at, step, _ in seen if at < line and step is not None]
            inc.base_step = max(steps) if steps else None
            for at, step, _ in seen:
                # (Read before the crash although later in the file: events
                # of one time come in file order, the crash when it ended.)
                weigh(inc, at, step, True)
                if inc.proof >= PROOF_LINES:
                    self._survives(inc, f"{file}:{at}")
                    break
        self._remember(inc, sig, alias)
        self._recent.append(inc)
        self._held.append(inc)

    def _survives(self, inc: Incident, source: str) -> None:
        """Decided: the program went on. Only the rank-merge hold remains."""
        inc.survived = source
        inc.deadline = min(inc.deadline, inc.arrival + self.config.crash_hold_s)
        self._rehold()

    def _latest(self, c: Crash, by_lines: bool) -> Incident | None:
        """The most recent incident that ``c`` may join: within the window in
        data time, or, for a consequence (``by_lines``) in the same file,
        within ``_LINE_WINDOW`` lines of its last line. A traceback carries
        the stamp of the last stamped line before it, minutes stale in a log
        that stamps only its logger lines, while torch elastic's lines after
        it carry their own; a second crash of its own is another incident
        however close its lines (a relaunch into the same file)."""
        if not self._recent:
            return None
        inc = self._recent[-1]
        if abs(c.time - inc.first_time) <= self.config.crash_dedupe_s:
            return inc
        if by_lines:
            file, _, line = stream_of(c)
            if file == inc.file and 0 <= line - inc.last_line <= _LINE_WINDOW:
                return inc
        return None

    def _restarted(self, inc: Incident, c: Crash) -> bool:
        return restarted(inc, c, self._progress, self._ends.get(inc.file, ()))

    def _remember(self, inc: Incident, *keys: str) -> None:
        for key in keys:
            self._open[key] = inc
            self._open.move_to_end(key)
        while len(self._open) > _KEYS_MAX:
            self._open.popitem(last=False)

    # -- sending --------------------------------------------------------------

    def _release(self, now: float) -> list[Alert]:
        """Send the held incidents due at ``now``. Called only at or past
        ``_due`` (before it none is due: callers test that, no list built)."""
        out: list[Alert] = []
        due = [inc for inc in self._held if now >= inc.deadline]
        for inc in due:
            self._held.remove(inc)
            out.extend(self._send(inc))
        self._rehold()
        return out

    def _quiet(self) -> list[Alert]:
        """No log is growing: the other ranks' copies are in, so the merge hold
        is over; what waits still is only a verdict not yet decided (the
        survival window, in data time, see the docstring)."""
        now = self._now()
        for inc in list(self._held):
            if inc.sealed or inc.survived is not None or not inc.survivable(self.name):
                inc.deadline = now
            else:
                inc.deadline = min(inc.deadline, inc.window_end)
        self._rehold()
        return self._release(now)

    def _learn_caught(self, inc: Incident) -> None:
        """``inc`` was sent critical, but its stream went on to a later step:
        a caught traceback after all. Its repeats fold into its episode."""
        if inc.signature not in self._survived:
            inc.survived = inc.survived or "later progress"
            self._survived[inc.signature] = inc
            if len(self._survived) > _SURVIVED_KEEP:
                self._survived.popitem(last=False)

    def _send(self, inc: Incident) -> list[Alert]:
        inc.sent = True
        if inc.silent:
            return []  # only the agent's own lines, no failure of its own
        if inc.survived is None and inc.survivable(self.name):
            # Critical now; watch its stream for proof that it lived on.
            watched = self._watch.setdefault(inc.stream, [])  # (the root's; renamed once its file is renumbered)
            watched.append(inc)
            del watched[:-_WATCH_KEEP]
            if len(self._watch) > STREAMS_MAX:
                self._watch.pop(next(iter(self._watch)))
        if inc.survived is not None and inc.survivable(self.name):
            first = self._survived.get(inc.signature)
            if first is not None:
                # The same caught traceback again: one episode for all of them.
                self._survived.move_to_end(inc.signature)
                first.count += inc.count
                first.last_time = max(first.last_time, inc.last_time)
                inc.folded = first
                return []
            self._survived[inc.signature] = inc
            if len(self._survived) > _SURVIVED_KEEP:
                self._survived.popitem(last=False)
            if self._survived_alerts >= SURVIVED_ALERTS_MAX:
                return []
            self._survived_alerts += 1
        inc.alert = incident_alert(inc, self.name, self.config)
        self._past.append(inc)
        return [inc.alert]
