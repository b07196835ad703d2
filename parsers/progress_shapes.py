"""Line shapes and the cache of their plans.

Shape key: the line's UTF-8 bytes with ASCII digits 1-9 made 0 (bytes are
translated in C, ~10x faster than str.translate). UTF-8 never uses
0x30-0x39 inside a multi-byte character, so equal keys mean equal text but
for digits, and lines of one shape share one plan (``parsers.progress_ops``).
"""

from __future__ import annotations

from .progress_fast import FastPlan, fast_plan
from .progress_ops import Ops
from .progress_plan import plan

_SHAPE = bytes.maketrans(b"123456789", b"000000000")
PLANS: dict[bytes, tuple[int, Ops, FastPlan | None]] = {}  # shape -> (rank_at, ops, fast plan or None)
PLANS_MAX = 512
PLAN_LINE_MAX = 2048  # longer lines are planned every time (bounded memory)


def line_shape(line: str) -> bytes:
    """The key of a line's plan: its UTF-8 with ASCII digits 1-9 made 0.

    The stream keys its own per-shape facts on it too, and hands it back to
    ``progress_fields`` so that a line is encoded once.
    """
    # surrogatepass: decoded logs may hold lone surrogates; any str encodes.
    return line.encode("utf-8", "surrogatepass").translate(_SHAPE)


def planned(line: str, shape: bytes) -> tuple[int, Ops, FastPlan | None]:
    rank_at, ops = plan(line)
    return rank_at, ops, (fast_plan(ops, line, shape) if ops else None)


def plan_of(line: str, shape: bytes) -> tuple[int, Ops, FastPlan | None]:
    """The cached plan of ``line``'s shape, planned on first sight."""
    found = PLANS.get(shape)
    if found is None:
        if len(PLANS) >= PLANS_MAX:
            PLANS.clear()
        found = PLANS[shape] = planned(line, shape)
    return found
