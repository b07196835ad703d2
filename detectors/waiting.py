"""Where the ranks of a hung run wait, in words, from their heartbeats.

Watchdog and heartbeat lines ("no step for 60 s (last step 537), waiting in
all_reduce") say where each rank is while nothing moves. Said per group of
ranks that wait in the same place at the same step, the rank that is
*behind* (a lower last step) is the hung one: the others went on to the
next collective and wait there for it. Pure text: the stall detector puts
it in its alert.

>>> from ..parsers.events import Heartbeat
>>> waiting_text([Heartbeat(0.0, "log:1", rank=r, last_step=537, waiting_in="all_reduce") for r in (0, 1, 2)]
...              + [Heartbeat(0.0, "log:2", rank=3, last_step=536)])
('rank 3 is behind at step 536; ranks 0-2 wait in all_reduce at step 537', [3])
"""

from __future__ import annotations

from ..parsers.events import Heartbeat


def _ranks_text(ranks: list[int | None]) -> str:
    """[0, 1, 2, 4] -> 'ranks 0-2, 4'; [3] -> 'rank 3'; [None] -> 'a rank'."""
    known = sorted(r for r in ranks if r is not None)
    if not known:
        return "a rank" if len(ranks) == 1 else f"{len(ranks)} ranks"
    runs: list[str] = []
    start = prev = known[0]
    for r in [*known[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ("rank " if len(known) == 1 else "ranks ") + ", ".join(runs)


def waiting_text(beats: list[Heartbeat]) -> tuple[str, list[int]]:
    """Where the ranks wait, from their heartbeats, and the ranks behind the others.

    Ranks that say the same (collective, step) are grouped; when their last
    steps differ, those at the lowest step are the hung ones: the others
    went on to the next collective and wait there for them.
    """
    groups: dict[tuple[str | None, int | None], list[int | None]] = {}
    for hb in beats:
        groups.setdefault((hb.waiting_in, hb.last_step), []).append(hb.rank)
    steps = {step for _, step in groups if step is not None}
    low = min(steps) if len(steps) > 1 else None
    behind: list[int] = []
    parts: list[tuple[int, str]] = []
    for (where, step), ranks in groups.items():
        who = _ranks_text(ranks)
        one = len(ranks) == 1
        if low is not None and step == low:
            behind += [r for r in ranks if r is not None]
            text = f"{who} {'is' if one else 'are'} behind at step {step}"
            text += f", waiting in {where}" if where else ""
            parts.append((0, text))
            continue
        text = f"{who} {'waits' if one else 'wait'}"
        text += f" in {where}" if where else ""
        text += f" at step {step}" if step is not None else ""
        parts.append((1, text if (where or step is not None) else f"{who} {'is' if one else 'are'} alive, no step"))
    parts.sort(key=lambda p: p[0])
    shown = [text for _, text in parts[:4]]
    if len(parts) > 4:
        shown.append(f"and {len(parts) - 4} more groups")
    return "; ".join(shown), sorted(behind)
