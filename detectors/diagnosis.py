"""What changed since the good run, most likely cause of the symptom first.

A pure function of (baseline profile, current profile, firing detectors):
``rank_changes`` lists every difference between the two profiles as a
``Change`` that says in one line why it does or does not explain the
symptom at hand, with the evidence and the next step to confirm it, and
orders them by that. The rules that score each kind of change, and the
``Change`` they return, live in ``diagnosis_rules``; this module holds the
ordering and the two faces (the full list, an alert's suspects).

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
from typing import Any

from .diagnosis_profile import Profile
from .diagnosis_rules import Change, Symptoms, all_changes

__all__ = ["Change", "Symptoms", "rank_changes", "suspects_for"]


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
    found = all_changes(base, now, symptoms)
    order = sorted(range(len(found)), key=lambda i: (-found[i].score, i))
    return [found[i] for i in order]


def suspects_for(
    baseline: Profile | Mapping[str, Any] | None,
    current: Profile | Mapping[str, Any] | None,
    firing: Iterable[str] = (),
    limit: int = 3,
) -> list[dict[str, Any]]:
    """The top ``limit`` suspects (compact dicts) for an alert's evidence:
    the causes, not the symptom rows."""
    return [c.compact() for c in rank_changes(baseline, current, firing) if not c.symptom][:limit]
