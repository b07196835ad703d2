"""A user's own progress format: a regex with named groups (the config's)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..events import Progress, new_progress
from ..numbers import finite, parse_number
from .ops import Fields, Values
from .run import rate_from


@dataclass(frozen=True, slots=True)
class ProgressPattern:
    """A user's own progress format: a regex with named groups.

    Groups ``step``, ``total``, ``tokens_per_s``, ``loss`` and
    ``step_seconds`` fill the fields of the same name; numbers may carry
    commas and SI suffixes. ``literals`` are substrings every matching line
    contains; given, they let the stream skip other lines without running the
    regex (without them every line is tried, which is slower).
    """

    pattern: str
    literals: tuple[str, ...] = ()
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    _GROUPS = ("step", "total", "tokens_per_s", "loss", "step_seconds")

    def __post_init__(self) -> None:
        try:
            compiled = re.compile(self.pattern)
        except (re.error, TypeError, ValueError) as exc:
            raise ValueError(f"progress pattern {self.pattern!r} is not a valid regex: {exc}") from None
        if not set(compiled.groupindex) & set(self._GROUPS):
            raise ValueError(
                f"progress pattern {self.pattern!r} names none of the groups {', '.join(self._GROUPS)}"
            )
        object.__setattr__(self, "literals", tuple(self.literals))
        object.__setattr__(self, "regex", compiled)

    def parse(self, line: str, time: float, source: str, rank: int | None = None) -> Progress | None:
        found = self.values(line, rank)
        return None if found is None else new_progress(time, source, *found[:7], True, *found[7:])

    def fields(self, line: str, rank: int | None = None) -> Fields | None:
        """The first seven of ``values``: what ``progress_fields`` returns."""
        found = self.values(line, rank)
        return None if found is None else found[:7]

    def values(self, line: str, rank: int | None = None) -> Values | None:
        """What ``parse`` reads, as ``progress_values`` returns it: the rate
        is the tokens/s, else one over the step time."""
        m = self.regex.search(line)
        if m is None:
            return None
        groups = m.groupdict()
        values: dict[str, float] = {}
        for name in self._GROUPS:
            text = groups.get(name)
            if text:
                value = parse_number(text)
                if value is not None:
                    values[name] = value
        step = values.get("step")
        total = values.get("total")
        step_int = int(step) if step is not None and math.isfinite(step) and step >= 0 else None
        total_int = int(total) if total is not None and math.isfinite(total) and total > 0 else None
        tokens = finite(values.get("tokens_per_s"))
        loss = values.get("loss")
        if step_int is None and tokens is None and loss is None:
            return None
        seconds = finite(values.get("step_seconds"))
        rate, unit = rate_from(tokens, None, None, seconds)
        return step_int, total_int, tokens, loss, rank, (), seconds, rate, unit, None
