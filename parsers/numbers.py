"""Numbers as training logs write them.

Loggers print comma thousands (``1,092,168``), SI suffixes (``22.8K``,
tqdm's ``1.23k``), time units (``480.04ms``), exponents in every spelling
(``1.210588E+01``, and tqdm's ``format_num``, which drops the exponent's
leading zero: ``2.1e+4``, ``1e-5``) and clocks (tqdm's ``[H:]MM:SS``).
One grammar for all of them, shared by every progress reader, so that a
number reads the same whatever line it is on.
"""

from __future__ import annotations

import math
import re

# A number: comma thousands, decimals, an exponent of any length and sign
# (``2.1e+4`` as tqdm's format_num writes it, ``2.02e+04`` as ``:.2e``
# does), nan and inf.
NUM = (
    r"[-+]?(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|NaN|inf|Inf)"
)
# A whole value token: number, SI suffix, time unit. Anchored (fullmatch),
# so it costs one attempt, not one per position of the line. Lightning's
# TQDMProgressBar writes a NaN loss as ``nan.0`` (and inf as ``inf.0``): the
# ``.0`` after the word is read past, the number is its word.
VALUE = re.compile(rf"(?P<num>{NUM})(?:(?<=[nNfF])\.0+)?(?P<si>[kKMGT])?(?P<unit>ms|min|s|m|h|%)?")

SI = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# tqdm's format_sizeof prefixes (``unit_scale=True``): lower-case k, up to Y.
TQDM_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}
SECONDS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_number(text: str) -> float | None:
    """``'1,092,168'`` -> 1092168.0, ``'22.8K'`` -> 22800.0,
    ``'2.1e+4'`` -> 21000.0; None if not a number."""
    text = text.strip()
    scale = 1.0
    if text[-1:] in SI and text[:-1]:
        scale = SI[text[-1]]
        text = text[:-1].rstrip()
    try:
        return float(text.replace(",", "")) * scale
    except ValueError:
        return None


def finite(value: float | None) -> float | None:
    """Rates and intervals must be real non-negative numbers to be any use."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value


def floats(text: str) -> bool:
    """Whether ``float`` takes the text (commas dropped): the readers' last
    word on a number, since the grammar above is wider than float's."""
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


# tqdm's format_interval: ``MM:SS`` or ``H:MM:SS`` (hours unbounded).
CLOCK = re.compile(r"(?:([0-9]{1,9}):)?([0-9]{1,9}):([0-9]{2})\Z")


def parse_clock(text: str) -> float | None:
    """tqdm's elapsed counter in seconds: ``'05:45'`` -> 345.0,
    ``'1:02:03'`` -> 3723.0; None if it is no clock."""
    m = CLOCK.match(text)
    if m is None:
        return None
    hours, minutes, seconds = m.groups()
    return float((int(hours) if hours else 0) * 3600 + int(minutes) * 60 + int(seconds))


__all__ = ["NUM", "VALUE", "SI", "TQDM_SI", "SECONDS", "parse_number", "finite", "floats", "parse_clock"]
