"""What changed since the good run, most likely cause of the symptom first.

A pure function of (baseline profile, current profile, firing detectors):
``rank_changes`` lists every difference between the two profiles as a
``Change`` that says in one line why it does or does not explain the
symptom at hand, with the evidence and the next step to confirm it, and
orders them by that. The rules that score each kind of change live in
``diagnosis_rules``; this module holds the shapes and the ordering.

The symptoms come from the firing alerts (``throughput_drop``,
``memory_volatility``, ``padding``, ``recompile``, ``alloc_thrash``,
``fx_tracing``, ``crash``) and from the profiles themselves (throughput
20% down, a GPU's memory band doubled), so a baseline diff of a finished
run needs no alert to have fired.

>>> good = {"throughput_tokens_per_s": 21500.0, "padding_efficiency": 0.93}
>>> bad = {"throughput_tokens_per_s": 4300.0, "padding_efficiency": 0.41}
>>> [c.what for c in rank_changes(good, bad, ["throughput_drop"])]
['padding_efficiency', 'throughput']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .diagnosis_profile import Profile
from .diagnosis_rules import Found, Symptoms, all_changes

__all__ = ["Change", "Symptoms", "rank_changes", "suspects_for"]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference, CONTRACTS section 7. ``what`` is one of the fixed
    names (``padding_efficiency``, ``package:transformers``, ...);
    ``baseline``/``now`` are JSON values (None: absent on that side);
    ``score`` orders the list (higher: explains more of the symptom);
    ``symptom``: the change is the symptom itself (throughput, step
    interval), listed for the evidence but never a suspect."""

    what: str
    baseline: Any
    now: Any
    says: str
    next_step: str
    score: float
    gpu: int | None = None
    symptom: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"what": self.what, "baseline": self.baseline, "now": self.now}
        if self.gpu is not None:
            out["gpu"] = self.gpu
        out.update(says=self.says, next_step=self.next_step, score=round(self.score, 3))
        return out

    def compact(self) -> dict[str, Any]:
        """The short form an alert's evidence carries (``suspects``)."""
        out: dict[str, Any] = {"what": self.what, "baseline": self.baseline, "now": self.now, "says": self.says}
        if self.gpu is not None:
            out["gpu"] = self.gpu
        return out


def _profile(p: Profile | Mapping[str, Any] | None) -> Profile:
    if p is None:
        return Profile()
    return p if isinstance(p, Profile) else Profile.from_mapping(p)


def rank_changes(
    baseline: Profile | Mapping[str, Any] | None,
    current: Profile | Mapping[str, Any] | None,
    firing: Iterable[str] = (),
) -> list[Change]:
    """Every change between the profiles, most likely cause first.

    ``baseline``/``current``: ``Profile``s or baseline-file mappings
    (CONTRACTS section 6). ``firing``: detector names of the alerts that
    fired (``{"throughput_drop", "fx_tracing"}``). Ties keep the rules'
    order (performance figures, then compilation, then the environment).
    """
    base, now = _profile(baseline), _profile(current)
    symptoms = Symptoms.of(base, now, frozenset(firing))
    found: list[Found] = all_changes(base, now, symptoms)
    order = sorted(range(len(found)), key=lambda i: (-found[i].score, i))
    return [
        Change(f.what, f.baseline, f.now, f.says, f.next_step, f.score, f.gpu, f.symptom)
        for f in (found[i] for i in order)
    ]


def suspects_for(
    baseline: Profile | Mapping[str, Any] | None,
    current: Profile | Mapping[str, Any] | None,
    firing: Iterable[str] = (),
    limit: int = 3,
) -> list[dict[str, Any]]:
    """The top ``limit`` suspects (compact dicts) for an alert's evidence:
    the causes, not the symptom rows."""
    return [c.compact() for c in rank_changes(baseline, current, firing) if not c.symptom][:limit]
