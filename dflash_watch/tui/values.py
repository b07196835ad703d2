"""Evidence values as an engineer reads them: units, words and lines, never Python reprs.

Detectors put nested values in an alert's evidence (a throughput drop's
``suspects``: a list of ``{what, baseline, now, says}``; a process exit's
``crash``: a dict). ``str()`` of those printed ``{'what': ...}``. Here every
value becomes lines of text: scalars in their unit (by the key's name),
a change as ``what now vs baseline: says``, other dicts as ``key: value``
lines, lists one item a line.

Values come from logs (an exception message, a thread name): the result is
plain text for ``rich.text.Text`` (through ``plain``), never markup.
"""

from __future__ import annotations

from typing import Any

from ..report import format_rate
from .text import fmt_bytes, fmt_clock, plain

TIME_KEYS = ("since", "time", "captured_at", "started_at", "ended_at")
MAX_ITEMS = 12  # a list longer than this shows its first items and a count
MAX_DEPTH = 4  # deeper nesting is shown flat: evidence is for reading, not a dump
_PERCENT_WHATS = ("padding_efficiency", "padding", "pad_eff", "accept", "acceptance")


def scalar(key: str, value: Any, tz: Any = None) -> str:
    """One number, flag or string in the unit its key names."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if key.endswith("_bytes") or key == "bytes":
            return fmt_bytes(value)
        if key.endswith("tokens_per_s"):
            return format_rate(value)
        if key in TIME_KEYS or key.endswith("_at"):
            return fmt_clock(value, tz)
        if key.endswith(("fraction", "_frac")) or key in _PERCENT_WHATS:
            return f"{value:.0%}"
        if key.endswith("_s") and isinstance(value, float):
            return f"{value:.3g} s"
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)
    return plain(str(value))


def change_line(change: dict, tz: Any = None) -> str:
    """A ``{what, baseline, now, says}`` change (a suspect, a diagnosis row) as one line."""
    what = plain(str(change.get("what", "?")))
    unit_key = what if what in _PERCENT_WHATS else what.rsplit(".", 1)[-1]
    now, was = change.get("now"), change.get("baseline")
    out = what
    if now is not None or was is not None:
        out += f" {scalar(unit_key, now, tz) if now is not None else 'missing'}"
        out += f" vs {scalar(unit_key, was, tz) if was is not None else 'none in the good run'}"
    says = change.get("says")
    if says:
        out += f": {plain(str(says))}"
    step = change.get("next_step")
    if step:
        out += f" (next: {plain(str(step))})"
    return out


def value_lines(key: str, value: Any, tz: Any = None, depth: int = 0) -> list[str]:
    """``value`` as lines of text (one line for a scalar)."""
    if isinstance(value, dict):
        if not value:
            return ["-"]
        if "what" in value and ("says" in value or "now" in value or "baseline" in value):
            return [change_line(value, tz)]
        if depth >= MAX_DEPTH:
            return [", ".join(f"{plain(str(k))}: {scalar(str(k), v, tz)}" for k, v in value.items())]
        lines: list[str] = []
        for k, v in value.items():
            inner = value_lines(str(k), v, tz, depth + 1)
            if len(inner) == 1:
                lines.append(f"{plain(str(k))}: {inner[0]}")
            else:
                lines.append(f"{plain(str(k))}:")
                lines += ["  " + line for line in inner]
        return lines
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if not items:
            return ["-"]
        if all(not isinstance(v, (dict, list, tuple)) for v in items):
            shown = ", ".join(scalar(key, v, tz) for v in items[:MAX_ITEMS])
            return [shown + (f", … ({len(items)} in all)" if len(items) > MAX_ITEMS else "")]
        lines = []
        for v in items[:MAX_ITEMS]:
            inner = value_lines(key, v, tz, depth + 1)
            lines.append("• " + inner[0])
            lines += ["  " + line for line in inner[1:]]
        if len(items) > MAX_ITEMS:
            lines.append(f"… ({len(items)} in all)")
        return lines
    return [scalar(key, value, tz)]


def format_value(key: str, value: Any, tz: Any = None) -> str:
    """``value`` as text, its lines joined by newlines."""
    return "\n".join(value_lines(key, value, tz))
