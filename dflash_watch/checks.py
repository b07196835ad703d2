"""The checks every config table shares: ranges, and one-line errors.

``dflash_watch.config`` (the top-level keys, ``[run]``, ``[gpu]``,
``[detectors]``, ``[keys]``) and ``dflash_watch.sinks.settings``
(``[[alerts.sink]]``) both word their errors with these helpers. They live
here, below both, so that neither imports the other's privates and the
import graph has no circle: ``config -> sinks.settings -> checks`` and
``config -> checks``, nothing back.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A config problem, worded for a one-line message on stderr."""


@dataclass(frozen=True, slots=True)
class Range:
    """The valid values of one numeric key.

    Non-finite values are never valid (TOML allows ``inf`` and ``nan``; no
    threshold means anything with them). ``integer`` keys take whole
    numbers (``4`` or ``4.0``) and are handed on as ``int``.
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def bounds(self) -> str:
        """``(0, 1]``, ``> 0``, ``whole >= 1``: the range as the template shows it."""
        whole = "whole " if self.integer else ""
        if math.isinf(self.high):
            return f"{whole}{'>' if self.low_open else '>='} {_num(self.low)}"
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open else "]"
        return f"{whole}{lo}{_num(self.low)}, {_num(self.high)}{hi}"

    def __str__(self) -> str:
        """As an error says it: ``in (0, 1)``, ``> 0``, ``a whole number >= 1``."""
        kind = "a whole number " if self.integer else ""
        text = self.bounds().removeprefix("whole ")
        return f"{kind}{text}" if math.isinf(self.high) else f"{kind}in {text}"

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid, or None when it is."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "must be a whole number" if self.integer else "must be a number"
        if isinstance(value, int) and abs(value) > 2**63:  # no float holds a 400-digit number
            return "must be a finite number"
        if not math.isfinite(value):
            return "must be a finite number"
        if self.integer and value != int(value):
            return "must be a whole number"
        below = value <= self.low if self.low_open else value < self.low
        above = value >= self.high if self.high_open else value > self.high
        if below or above:
            return f"must be {self}"
        return None

    def coerce(self, value: Any) -> Any:
        return int(value) if self.integer else float(value)

    @classmethod
    def parse(cls, text: str) -> Range:
        """The range ``bounds()`` spells as ``text`` (``"> 0"``, ``"(0, 1]"``,
        ``"whole >= 1"``): how the pure core declares a threshold's range
        (``detectors.config.knob``) without importing this module."""
        m = _BOUNDS.fullmatch(text.strip())
        if m is None:
            raise ValueError(f"not a range: {text!r} (like '> 0', '(0, 1]', 'whole >= 1')")
        integer = bool(m["whole"])
        if m["op"]:
            return cls(float(m["low"]), low_open=m["op"] == ">", integer=integer)
        return cls(float(m["lo"]), float(m["hi"]), low_open=m["open"] == "(", high_open=m["close"] == ")",
                   integer=integer)


_NUMBER = r"-?\d+(?:\.\d+)?"
_BOUNDS = re.compile(rf"(?P<whole>whole )?(?:(?P<op>>=|>) (?P<low>{_NUMBER})"
                     rf"|(?P<open>[\[(])(?P<lo>{_NUMBER}), (?P<hi>{_NUMBER})(?P<close>[\])]))")


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


POSITIVE = Range(0.0, low_open=True)
NON_NEGATIVE = Range(0.0)
FRACTION = Range(0.0, 1.0, low_open=True, high_open=True)  # (0, 1)
SHARE = Range(0.0, 1.0, low_open=True)  # (0, 1]
UNIT = Range(0.0, 1.0)  # [0, 1]
COUNT = Range(1.0, integer=True)


def show(value: Any) -> str:
    """A value as TOML would spell it, control characters escaped (it is data)."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def where(section: str | None, key: str) -> str:
    """``[run] grace_s``, or ``logs`` for a top-level key."""
    return f"[{section}] {key}" if section else key


def hint(key: str, known: list[str] | tuple[str, ...], *, many: int = 12) -> str:
    """What an unknown key probably meant: the nearest known one, else the list."""
    near = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    if near:
        return f"did you mean {near[0]}?"
    if len(known) > many:
        return "`dflash-watch init` writes a template listing every key"
    return f"known: {', '.join(sorted(known))}"


def unknown(section: str | None, key: str, known: list[str] | tuple[str, ...] | frozenset[str], *,
            many: int = 12) -> ConfigError:
    """``[run] grace: unknown key (did you mean grace_s?)``; ``many``: up to how
    many known keys the message lists when none is near."""
    return ConfigError(f"{where(section, key)}: unknown key ({hint(key, list(known), many=many)})")


def bad(section: str | None, key: str, value: Any, why: str) -> ConfigError:
    """``[run] grace_s = -1: must be >= 0``."""
    return ConfigError(f"{where(section, key)} = {show(value)}: {why}")
