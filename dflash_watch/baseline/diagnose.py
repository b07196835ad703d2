"""What changed since the good run: for a live Monitor (the dashboard's `d`),
and the symptoms ``baseline diff`` explains for a replayed one.

The same ranking as `baseline diff` (``detectors.diagnosis.rank_changes``),
fed from the live session instead of a replay: the Monitor's recent window
as the current profile, its baseline as the good run's, the detectors that
fired this session as the symptoms, and the environment of the running job
(``/proc`` of its training process) or of the venv the session was told
about. Reading ``/proc``, dist-info and the compile cache takes up to a
couple of seconds, so callers run this off the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..monitor import Monitor

WINDOW_S = 600.0
FingerprintSource = Callable[[], "dict[str, Any] | None"]


@dataclass(slots=True)
class Diagnosis:
    """What the screen shows: the ranked changes, or why there are none."""

    baseline: str | None
    changes: Sequence[dict[str, Any]] = ()
    # Why the list is empty or partial ("no baseline yet: press b ...").
    note: str | None = None
    # The symptoms the ranking explained (firing detectors), for the title.
    symptoms: Sequence[str] = field(default_factory=tuple)


def session_symptoms(monitor: Monitor) -> set[str]:
    """Detectors firing now, and those that fired earlier this session.

    A crash is one moment, and a slowdown's alert may have resolved when the
    job died of it; both are still what the user is asking about when they
    ask what changed. (The history is bounded: the last 2000 alerts.)"""
    firing = {a.detector for a in monitor.alerts.firing()}
    firing.update(a.detector for a in monitor.alerts.history if a.state == "firing")
    firing.discard("process_exit")
    return firing


def fired_detectors(monitor: Monitor) -> set[str]:
    """Detector names of every alert that fired while the Monitor ran (a
    replayed window: what ``baseline diff`` explains)."""
    return {a.detector for a in monitor.alerts.history if a.state == "firing"}


def symptomatic(good: dict[str, Any], current: dict[str, Any], fired: set[str]) -> bool:
    """Whether the current run shows a symptom against the good run
    (throughput down, memory swinging, padding fallen, a crash fired):
    ``baseline diff`` exits 1 then, 0 when the changes are only a record."""
    from dflash_watch.detectors.diagnosis import Symptoms
    from dflash_watch.detectors.diagnosis_profile import Profile

    symptoms = Symptoms.of(Profile.from_mapping(good), Profile.from_mapping(current), frozenset(fired))
    return any(getattr(symptoms, name) for name in symptoms.__slots__)


def job_fingerprint(job: Any) -> dict[str, Any] | None:
    """The running job's environment, read from its training process
    (``environment.running_training_pid``); None when not running or unreadable."""
    from .environment import running_training_pid
    from .fingerprint import FingerprintError, fingerprint_of_pid

    pid = running_training_pid(job)
    if pid is None:
        return None
    try:
        return fingerprint_of_pid(pid).to_dict()
    except FingerprintError:
        return None


def live_diagnosis(monitor: Monitor, fingerprint: FingerprintSource | None = None,
                   baseline_path: str | None = None) -> Diagnosis:
    """The ranked changes of the live run against the Monitor's baseline."""
    from dflash_watch.detectors.diagnosis import rank_changes

    from .profile import profile_of_monitor

    with monitor.lock:
        baseline = monitor.baseline
        symptoms = sorted(session_symptoms(monitor))
    where = baseline_path if baseline is not None else None
    if baseline is None:
        return Diagnosis(None, note="no baseline yet: press b on a healthy stretch, or start with --baseline F "
                         "(dflash-watch baseline save), to compare this run with a good one", symptoms=symptoms)
    env = fingerprint() if fingerprint is not None else None
    with monitor.lock:
        current = profile_of_monitor(monitor, WINDOW_S, env)
    if current is None:
        return Diagnosis(where, note="no throughput in the last 10 minutes yet: nothing to compare", symptoms=symptoms)
    good = baseline.to_dict()
    note = None
    if env is None and isinstance(good.get("fingerprint"), dict):
        note = "the job's environment could not be read (not running?): packages, variables and files not compared"
    changes = [c.to_dict() for c in rank_changes(good, current, set(symptoms))]
    return Diagnosis(where, changes, note=note, symptoms=symptoms)
