"""The straggler detector's ``hung`` rules, as functions of the ranks' state.

Two ways a rank is found hung (``straggler.py`` fires, on a Tick at
``next_deadline``):

* nobody stepped for ``limit`` (``max(straggler_hung_min_s,
  straggler_hung_factor`` x the busiest rank's step interval), plus the
  phase allowance while an eval or a save runs): a stall, and a straggler
  when the others wait on one rank. That rank is silent and either behind
  the others' last step, or the others' heartbeats say they wait in a
  collective (or their collective timed out) while it does not. Everyone
  stopped at one step with nobody waiting is a plain stall: not ours.
* the run steps on, but one rank has been silent for ``limit`` by its own
  cadence and the others are ahead of it by more than two of its
  reporting strides: it stopped reporting (its probe heartbeat stopped).

>>> from .config import DetectorConfig
>>> ranks = {r: RankState(r, 0.0) for r in range(3)}
>>> for r, state in ranks.items():
...     for i in range(10 if r < 2 else 9):
...         state.add(float(i), step=i, window_s=60.0)
>>> s, why = find_hung(list(ranks.values()), DetectorConfig(), False, 70.0)
>>> s.rank, why
(2, 'behind')
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from ..parsers.native import KERNELS
from .config import DetectorConfig, fmt_duration
from .straggler_ranks import RankState

# The passes over the ranks in C where the kernels are built (``hung_pass``,
# ``hung_floor``; the rank state's fields registered by ``straggler_ranks``).
_HUNG_PASS = KERNELS.hung_pass if KERNELS is not None else None

_USUAL = attrgetter("usual_s")  # (a C call: ``limit`` reads it for every rank)


def stepping(ranks: list[RankState]) -> list[RankState]:
    """The ranks that reported a step: the only ones a hang is judged on."""
    return [s for s in ranks if s.last_step is not None and s.last_step_time is not None]


def limit(ranks: list[RankState], config: DetectorConfig, in_phase: bool) -> float:
    """How long nobody may step before the others' waiting is a hang: the
    silence the busiest rank's cadence allows (``silence_limit``), the floor
    while no rank has a cadence yet."""
    timed = [s for s in ranks if s.usual_s is not None]
    return stall_limit(min(timed, key=_USUAL).usual_s if timed else None, config, in_phase)


def stall_limit(busiest: float | None, config: DetectorConfig, in_phase: bool) -> float:
    """``limit`` from the least cadence of the stepping ranks (None: none has
    one yet): ``silence_limit`` of that rank, the floor without one, plus the
    phase allowance. The one-pass rules (``next_deadline``, ``find_hung``)
    find that cadence on their way over the ranks."""
    out = config.straggler_hung_min_s
    if busiest is not None:
        own = config.straggler_hung_factor * busiest
        if own > out:  # (``max(floor, own)``: the floor unless own is greater)
            out = own
    return out + config.straggler_phase_allowance_s if in_phase else out


def silence_limit(state: RankState, config: DetectorConfig) -> float | None:
    """How long this rank may be silent by its own cadence (None: no cadence yet).

    Called for every rank on every judgement: the rule stays inline."""
    usual = state.usual_s
    if usual is None:
        return None
    return max(config.straggler_hung_min_s, config.straggler_hung_factor * usual)


def next_deadline(ranks: list[RankState], config: DetectorConfig, in_phase: bool, now: float) -> float | None:
    """The earliest time after ``now`` at which a hang could be judged true.

    One pass over the ranks (64 ranks, at every judgement and every
    committed run of step lines): ``stepping``, the latest step, ``limit``'s
    busiest cadence and each rank's own silence (``silence_limit`` inline)
    together. The earliest own end after ``now`` is kept aside and taken
    when it is under the stall's: what the ends one by one under a falling
    best would give (``tests/core/test_ranks_speed_intake.py`` and
    ``test_detector_shortcuts.py`` hold it to the plain rules)."""
    floor, factor = config.straggler_hung_min_s, config.straggler_hung_factor
    found = None if _HUNG_PASS is None else _HUNG_PASS(ranks, floor, factor, now)  # the pass in C where built
    if found is None:
        found = _pass(ranks, floor, factor, now)
    stepped, last, busiest, soonest = found
    if stepped < 2:
        return None
    best = last + stall_limit(busiest, config, in_phase)  # at or before ``now``: judged already
    if soonest < best:
        best = soonest
    return best if best > now else None


def _pass(ranks: list[RankState], floor: float, factor: float, now: float) -> tuple[int, float, float | None, float]:
    """``next_deadline``'s pass in Python: (the stepping ranks, their latest
    step time, the least cadence, the earliest own end after ``now``)."""
    stepped = 0
    last = 0.0  # the latest step, ``max`` as the builtin takes it (the first, then any greater)
    busiest: float | None = None  # the least cadence (``limit``: ``min`` as the builtin)
    soonest = math.inf  # the earliest own end after ``now``
    for s in ranks:
        at = s.last_step_time
        if s.last_step is None or at is None:
            continue  # not stepping
        at = at or 0.0
        if not stepped or at > last:
            last = at
        stepped += 1
        usual = s.usual_s
        if usual is None:
            continue
        if busiest is None or usual < busiest:
            busiest = usual
        seen = s.last_seen
        if seen is None:
            continue
        own = factor * usual
        end = seen + (own if own > floor else floor)
        if now < end < soonest:
            soonest = end
    return stepped, last, busiest, soonest


def quiet_floor(ranks: Iterable[RankState], since: float) -> float:
    """A time no hang judgement or ``next_deadline`` can go under while only
    step lines stamped at or after ``since`` come (``since`` = inf: none
    that name a rank), minus ``straggler_hung_min_s``: the batching proof
    of ``Straggler.quiet_steps``.

    Every limit of the rules is at least ``straggler_hung_min_s`` (a
    phase only adds to it), and each is counted from one of two times: the
    latest step of the stepping ranks (the largest ``last_step_time``,
    which step lines only set to their own stamps) or a timed rank's
    ``last_seen`` (which never goes back, and a rank that gets a cadence
    from these lines was seen at one of them). So both are at least the
    minimum of the latest step, the oldest ``last_seen`` of a timed rank,
    and ``since``: until that floor plus ``straggler_hung_min_s`` no rank
    is found hung, and no deadline comes earlier."""
    found = None if KERNELS is None else KERNELS.hung_floor(ranks, since)  # in C where built
    if found is not None:
        return found
    last = -math.inf
    oldest = math.inf
    for s in ranks:
        at = s.last_step_time
        if at is not None and s.last_step is not None and at > last:
            last = at
        seen = s.last_seen
        if s.usual_s is not None and seen is not None and seen < oldest:
            oldest = seen
    return min(last if last > -math.inf else math.inf, oldest, since)


def find_hung(ranks: list[RankState], config: DetectorConfig, in_phase: bool,
              t: float) -> tuple[RankState, str] | None:
    """(the hung rank, why: ``behind``, ``waited on`` or ``silent``), or None.

    The stepping ranks, their latest step and its time, and the least
    cadence (``limit``) in one pass: this runs at every judgement (each
    second of data time, on every rank)."""
    stepped: list[RankState] = []
    last = 0.0  # ``max`` of the step times as the builtin takes it (the first, then any greater)
    top = 0  # the same of the steps
    busiest: float | None = None  # ``min`` of the cadences, likewise
    for s in ranks:
        at, step = s.last_step_time, s.last_step
        if step is None or at is None:
            continue  # not stepping
        at = at or 0.0
        step = step or 0
        if not stepped:
            last, top = at, step
        else:
            if at > last:
                last = at
            if step > top:
                top = step
        usual = s.usual_s
        if usual is not None and (busiest is None or usual < busiest):
            busiest = usual
        stepped.append(s)
    if len(stepped) < 2:
        return None
    ranks = stepped
    wait = stall_limit(busiest, config, in_phase)
    if t - last >= wait:
        # Nobody stepped: a stall. A straggler if the others wait on one.
        waiters = [s for s in ranks if s.waits_on_others()]
        silent = [s for s in ranks if not s.waits_on_others() and (s.last_seen or 0.0) <= t - wait]
        behind = [s for s in silent if (s.last_step or 0) < top]
        if behind:
            return min(behind, key=lambda s: (s.last_step or 0, s.rank)), "behind"
        if waiters and silent and len(silent) < len(ranks):
            return min(silent, key=lambda s: (s.last_step or 0, s.rank)), "waited on"
        return None
    # The run steps on: a rank silent far beyond its own cadence stopped
    # reporting. The silent ones first (``silence_limit`` inline, once per
    # rank per judgement), then in rank order: the lowest that qualifies.
    floor, factor = config.straggler_hung_min_s, config.straggler_hung_factor
    quiet: list[RankState] = []
    for s in ranks:
        usual = s.usual_s
        seen = s.last_seen
        if usual is None or seen is None:
            continue
        own = factor * usual
        if not t - seen < (own if own > floor else floor):
            quiet.append(s)
    if not quiet:
        return None
    for s in sorted(quiet, key=lambda s: s.rank):
        ahead = max((o.last_step or 0) for o in ranks if o is not s)
        if ahead >= (s.last_step or 0) + 2 * s.usual_n:
            return s, "silent"
    return None


def hung_report(s: RankState, ranks: list[RankState], why: str, t: float,
                gpu: int | None) -> tuple[str, dict[str, Any]]:
    """The alert's message and evidence: the rank, and where the others wait."""
    on = f" (GPU {gpu})" if gpu is not None else ""
    silence = t - (s.last_seen if s.last_seen is not None else t)
    waiting: dict[str, list[int]] = {}
    for o in ranks:
        where = o.waiting_in()
        if o is not s and where is not None and o.waits_on_others():
            waiting.setdefault(where, []).append(o.rank)
    top = max(((o.last_step or 0) for o in stepping(ranks) if o is not s), default=0)
    message = f"rank {s.rank}{on} is hung: nothing from it for {fmt_duration(silence)}, last step {s.last_step}"
    if (s.last_step or 0) < top:
        message += f" (the others reached step {top})"
    if waiting:
        message += "; " + "; ".join(f"ranks {_ranks(rs)} wait in {where}" if len(rs) > 1
                                    else f"rank {rs[0]} waits in {where}" for where, rs in waiting.items())
    elif why == "silent":
        message += "; the other ranks step on without it"
    evidence: dict[str, Any] = {
        "rank": s.rank, "gpu": gpu, "why": why, "last_step": s.last_step, "last_seen": s.last_seen,
        "others_last_step": top, "waiting": waiting,
    }
    return message, evidence


def _ranks(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    if len(ranks) > 8:
        return ", ".join(map(str, ranks[:8])) + f" and {len(ranks) - 8} more"
    return ", ".join(map(str, ranks))
