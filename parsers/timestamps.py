"""Line timestamps (CONTRACTS section 5), read cheaply and with memory.

A replayed run must run on the log's own clock, so every event needs the time
its line was written. Training logs mix several styles in one file (Python
logging, glog lines from torch's C++ side, bracketed ezpz headers, JSON
lines), and glog lines lack a year, so the parser is a small object per
stream: it remembers the last full year it saw and the last minute it
converted, because consecutive lines usually share their minute and a
string compare plus int() of the seconds is far cheaper than a datetime.

Only the start of a line is looked at (after indentation, rank prefixes, one
``[LEVEL]`` tag and an opening bracket): a date in the middle of a line is
usually about something else (a checkpoint name, a SLURM deadline).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from .native import KERNELS
from .ranks import split_rank

_DIGITS = frozenset("0123456789")
_FRACTION_MARKS = frozenset(".,")
# After an ISO fraction: a zone starts with one of these, and a digit would
# mean more than 9 fraction digits (the regex then reads no fraction at all).
_ZONE_OR_DIGIT = frozenset("Z+-0123456789")
_ZONE_OR_DIGIT_B = frozenset(c.encode() for c in _ZONE_OR_DIGIT) | {b""}
# A line shape (digits made 0) that starts with "YYYY-MM-DD HH:MM:SS", or
# with "MM/DD/YYYY HH:MM:SS" (Python logging's ``%m/%d/%Y %H:%M:%S``).
_ISO_SHAPE = re.compile(rb"0000-00-00[T ]00:00:00")
_US_SHAPE = re.compile(rb"00/00/0000 00:00:00")

# Date and time to the second in one group (the cache key), then fraction
# and zone. ``[0-9]`` rather than ``\d``: other scripts' digits are not dates.
_ISO = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2})"
    r"(?:[.,]([0-9]{1,9}))?(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?(?![0-9])"
)
_US = re.compile(
    r"([0-9]{1,2})/([0-9]{1,2})/([0-9]{4}|[0-9]{2})[ T]+([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:[.,]([0-9]{1,9}))?(?![0-9])"
)
# glog: level letter, month and day (``1129``, or ``911`` for Sep 11), time.
# torch's own logs (``TORCH_LOGS``) write glog's shape with DEBUG as ``V`` and
# CRITICAL as ``C`` (torch/_logging/_internal.py): its recompile lines are ``V``.
_GLOG_LEVELS = "IWEFVC"
_GLOG_LEVEL_BYTES = _GLOG_LEVELS.encode()
_GLOG = re.compile(r"[IWEFVC]([0-9]{3,4}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?![0-9])")
_LEVEL = re.compile(r"\[[A-Z]{3,8}\]")
_JSON_TIME = re.compile(
    r'"(?:time|timestamp)"\s*:\s*(?:"([^"]{8,48})"|(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?))'
)

# Epoch numbers in JSON lines: plausible seconds (2001..2286) or milliseconds.
# Anything else under a "time" key is a duration, not a date.
_EPOCH_S = (1e9, 1e10)
_EPOCH_MS = (1e12, 1e13)

_ERRORS = (ValueError, OverflowError, OSError)
_POW10: tuple[int, ...] = tuple(10**n for n in range(10))


def _fraction(digits: str | None) -> float:
    if not digits:
        return 0.0
    scale: int = 10 ** len(digits)
    return int(digits) / scale


def _zone(text: str) -> tzinfo:
    if text == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    body = text[1:].replace(":", "")
    minutes = int(body[:2]) * 60 + (int(body[2:4]) if len(body) >= 4 else 0)
    return timezone(sign * timedelta(minutes=minutes))


class TimeParser:
    """Reads the timestamp at the start of a line; one per log stream.

    ``tz`` is the zone of naive times (None: the local zone). ``default_year``
    dates glog lines seen before any full timestamp; the core never reads a
    clock, so the caller passes the current year (live) or the file's year
    (replay). Without either, a glog line has no usable time and parses as
    None.
    """

    __slots__ = (
        "_tz", "_default_year", "_year", "_month", "_prev",
        "_iso_key", "_iso_val", "_min_key", "_min_val", "_min_ym", "_frac_len", "_us_key", "_us_val", "_glog_key", "_glog_val",
    )

    def __init__(self, tz: tzinfo | None = None, default_year: int | None = None) -> None:
        self._tz = tz
        # The last wall time converted (to the minute or second): which of an
        # ambiguous hour's two readings is meant follows from it.
        self._prev: float | None = None
        self._default_year = default_year
        self._year: int | None = None
        self._month: int | None = None
        # One-entry caches per style: (key text, (epoch, year, month)).
        self._iso_key = ""
        self._iso_val: tuple[float, int, int] = (0.0, 0, 0)
        # The minute of the last zone-less full stamp as written, ISO or US
        # ("2025-11-29 10:00", "11/29/2026 10:00"), its epoch, (year, month),
        # and the length of its fraction (``_read_minute``).
        self._min_key = ""
        self._min_val = 0.0
        self._min_ym: tuple[int, int] = (0, 0)
        self._frac_len = 0
        # The last US stamp's minute as written, and (its epoch, year, month).
        self._us_key = ""
        self._us_val: tuple[float, int, int] = (0.0, 0, 0)
        self._glog_key: tuple[str, int] = ("", 0)
        self._glog_val = 0.0

    @property
    def year(self) -> int | None:
        """The year glog lines are currently dated in, if known."""
        return self._year if self._year is not None else self._default_year

    def parse(self, line: str) -> float | None:
        """Seconds since the epoch of the line's timestamp, or None.

        A line that starts with the minute read last (most lines of a
        stamped log) is read by ``_same_minute`` at once: ``_parse`` would
        send it, first character a digit, to ``_iso`` or ``_us`` (the style
        that wrote ``_min_key``), whose first step is that same call. Three
        calls fewer, on the stream's every look back for a stamp."""
        if line[:16] == self._min_key:
            found = self._same_minute(line)
            if found is not None:
                return found
        return self._parse(line, False)

    def parse_dated(self, line: str) -> float | None:
        """``parse`` for stamps with a full date; a glog stamp reads as None.

        A glog stamp has no year: its value depends on the lines parsed
        before it. The other styles do not, so a caller may parse such a
        line out of order (the stream reads an event line's own stamp before
        deciding whether the lines above it need reading at all).
        """
        if line[:16] == self._min_key:  # as ``parse`` reads it
            found = self._same_minute(line)
            if found is not None:
                return found
        return self._parse(line, True)

    def _parse(self, line: str, dated_only: bool) -> float | None:
        s = line
        c = s[:1]
        if c == " " or c == "\t":
            s = s.lstrip(" \t")
            c = s[:1]
        if c == "[":
            return self.parse_split(split_rank(s)[1], dated_only)
        return self._stamp(s, c, dated_only)

    def parse_split(self, s: str, dated_only: bool) -> float | None:
        """``_parse`` of a line that starts with '[', given the text after its
        rank prefixes (``split_rank(line)[1]``: the stream splits a line
        once). The text is read as if it stood alone (``parsers.ranks``):
        spaces before its stamp are skipped, as ``_parse`` skips them
        before a line's."""
        c = s[:1]
        if c == " " or c == "\t":
            s = s.lstrip(" \t")
        if s[:1] == "[":
            level = _LEVEL.match(s)
            if level is not None:
                s = s[level.end():]
            if s[:1] == "[":
                s = s[1:]
        return self._stamp(s, s[:1], dated_only)

    def _stamp(self, s: str, c: str, dated_only: bool) -> float | None:
        """``_parse`` once ``s`` is where the stamp may start, ``c`` its first character."""
        if not c:
            return None
        if c in _DIGITS:
            if s[4:5] == "-":
                return self._iso(s)
            if "/" in s[1:3]:
                return self._us(s)
            return None
        if c in _GLOG_LEVELS:
            if s[1:2] and s[1:2] in _DIGITS and not dated_only:
                return self._glog(s)
            return None
        if c == "{" and '"time' in s:
            return self._json(s)
        return None

    @staticmethod
    def stampless(shape: bytes) -> bool:
        """For a line shape (``parsers.progress.line_shape``): True when no
        line of the shape has a stamp of its own, whatever its digits --
        ``parse`` and ``parse_dated`` read None on every one (``_parse``:
        after blanks, the first character is no digit, no '[', no '{' and
        no glog level letter before a digit). A tqdm bar's line is such."""
        s = shape.lstrip(b" \t")
        c = s[:1]
        if not c or c in b"0[{":
            return False
        return not (c in _GLOG_LEVEL_BYTES and s[1:2] == b"0")

    @staticmethod
    def iso_layout(shape: bytes) -> int | None:
        """For a line shape (``parsers.progress.line_shape``): the number of
        fraction digits when every line of the shape starts with a zone-less
        ISO stamp that ``iso_run`` reads (0: no fraction), else None."""
        if len(shape) < 20 or not _ISO_SHAPE.match(shape):
            return None
        mark = shape[19:20]
        if mark in (b".", b","):
            n = len(shape) - 20 - len(shape[20:].lstrip(b"0"))
            if not 1 <= n <= 9 or shape[20 + n : 21 + n] in _ZONE_OR_DIGIT_B:
                return None
            return n
        if mark in _ZONE_OR_DIGIT_B:
            return None
        return 0

    def iso_run(self, lines: list[str], frac_len: int) -> list[float]:
        """``parse_dated`` of each line in order, for lines of one shape whose
        ``iso_layout`` is ``frac_len``; stops before the first line it cannot
        date (the list is then shorter than ``lines``).

        Inside one minute a stamp costs a slice compare and two int():
        ``_iso``'s fast path, with the checks the shape already made left out.
        """
        return self._minute_run(lines, frac_len, self._iso)

    def _minute_run(
        self,
        lines: list[str],
        frac_len: int,
        parse: Callable[[str], float | None],
    ) -> list[float]:
        """The loop of ``iso_run`` and ``us_run``: while a line's first 16
        characters repeat the minute ``parse`` read last (``_read_minute``:
        the shape says every line's stamp is zone-less, its minute its first
        16 characters), its seconds and fraction are added to that minute's
        epoch; other lines go through ``parse``."""
        out: list[float] = []
        append = out.append
        key = None  # the minute that the fast path may use, or None
        base = 0.0
        end = 20 + frac_len
        scale = _POW10[frac_len]
        # The fast path in C where built (``parsers.native``): it reads the
        # lines of the minute it holds, from ``i`` on, and says where it stopped.
        stamps = KERNELS.minute_stamps if KERNELS is not None else None
        i, n = 0, len(lines)
        while i < n:
            if stamps is not None and key is not None:
                i = stamps(lines, i, key, base, frac_len, out)
                if i == n:
                    break
            s = lines[i]
            i += 1
            if key is not None and s[:16] == key and s[17:19] < "60":
                if frac_len:
                    append(base + int(s[17:19]) + int(s[20:end]) / scale)
                else:
                    append(base + int(s[17:19]) + 0.0)
                continue
            value = parse(s)
            if value is None:
                break
            append(value)
            key, base = self._min_key, self._min_val
        return out

    def run_parse(self, run: Callable[[list[str], int], list[float]]) -> Callable[[str], float | None]:
        """The one-line reading behind ``run`` (``iso_run`` or ``us_run``):
        what ``_minute_run`` calls on a line outside the minute it holds."""
        return self._iso if run == self.iso_run else self._us

    def minute(self) -> tuple[str, float]:
        """(the minute just read as written, its epoch): what ``_minute_run``
        adds the seconds of the lines after a parsed one to."""
        return self._min_key, self._min_val

    def minute_for(self, frac_len: int) -> tuple[str, float] | None:
        """``minute()`` when ``parse`` would read a lane line of ``frac_len``
        fraction digits that starts with that minute from it (``_same_minute``:
        a fraction as long as the last one), else None. A caller that reads
        lane lines in ``_minute_run``'s way may then add seconds to it from a
        stretch's first line on, not only from its second, calling
        ``minute_entered`` when it does: same values, same state after."""
        if not self._min_key or self._frac_len != frac_len:
            return None
        return self._min_key, self._min_val

    def last_in_minute(self, text: str, lo: int, hi: int) -> float | None:
        """``parse`` of the last line starting in ``text[lo:hi]`` (its
        newline at ``hi - 1`` not its own) when it repeats the minute read
        last and ``_same_minute`` reads it, in C (``parsers.native``); else
        None, and the caller reads the lines itself. State as ``parse``
        leaves it. A tqdm bar between stamped lines is dated by the line
        before it: this is that look, once per bar."""
        if KERNELS is None:
            return None
        value = KERNELS.last_minute(text, lo, hi, self._min_key, self._min_val, self._frac_len)
        if value is not None:
            self._year, self._month = self._min_ym
        return value

    def minute_entered(self) -> None:
        """What ``_same_minute`` leaves behind when it reads a line: the year
        and month of the minute (glog lines after it take them)."""
        self._year, self._month = self._min_ym

    @staticmethod
    def us_layout(shape: bytes) -> int | None:
        """``iso_layout`` for lines that start with a US stamp as Python
        logging writes it (``11/29/2026 10:00:00``, two-digit month and day,
        one space): the fraction digits ``us_run`` reads, else None."""
        if len(shape) < 20 or not _US_SHAPE.match(shape):
            return None
        mark = shape[19:20]
        if mark in (b".", b","):
            n = len(shape) - 20 - len(shape[20:].lstrip(b"0"))
            if n == 0:
                return 0  # "10:00:00. x": the regex reads no fraction either
            if n > 9:
                return None
            return n
        if mark == b"0":
            return None
        return 0

    def us_run(self, lines: list[str], frac_len: int) -> list[float]:
        """``iso_run`` for lines whose ``us_layout`` is ``frac_len``: the
        same values as ``parse_dated`` line by line, the minute's epoch
        reused while the minute text repeats."""
        return self._minute_run(lines, frac_len, self._us)

    # -- full timestamps: they set the year that glog lines inherit --------

    def _iso(self, s: str) -> float | None:
        if s[:16] == self._min_key:
            found = self._same_minute(s)
            if found is not None:
                return found
        m = _ISO.match(s)
        if m is None:
            return None
        zone = m.group(3)
        head = m.group(1)
        key = head[:16] + zone if zone else head[:16]
        if key != self._iso_key:
            try:
                tz = _zone(zone) if zone else self._tz
                value = self._epoch(
                    int(head[0:4]), int(head[5:7]), int(head[8:10]), int(head[11:13]), int(head[14:16]), 0, tz,
                )
            except _ERRORS:
                return None
            self._iso_key = key
            self._iso_val = (value, int(head[0:4]), int(head[5:7]))
        value, self._year, self._month = self._iso_val
        second = int(head[17:19])
        if second > 59:
            return None  # as datetime() would say
        fraction = m.group(2)
        if not zone:
            self._read_minute(head[:16], self._iso_val, fraction)
        return value + second + _fraction(fraction)

    # -- the minute just read: the one home of "reuse it" ------------------

    def _read_minute(self, key: str, minute: tuple[float, int, int], fraction: str | None) -> None:
        """A zone-less full stamp (ISO or US) was just read: its minute as
        written (``key``), that minute's (epoch, year, month), and its
        fraction's length, for ``_same_minute`` and ``_minute_run``."""
        self._min_key = key
        self._min_val, year, month = minute
        self._min_ym = (year, month)
        self._frac_len = len(fraction) if fraction else 0

    def _same_minute(self, s: str) -> float | None:
        """The stamp of ``s`` when it repeats the minute just read
        (``s[:16] == _min_key``, the caller checked), then two seconds
        digits, a fraction as long as the last one and a plain end, as the
        style's regex would read them; else None (the regex reads it).
        Seconds and fraction are added arithmetically: slice compares and
        int(), no match object. (A zone's offset never changes inside a
        minute, and a zone after the fraction is left to the regex.)"""
        if s[16:17] != ":":
            return None
        sec = s[17:19]
        if len(sec) != 2 or not (sec.isdigit() and sec.isascii()) or sec >= "60":
            return None
        mark = s[19:20]
        if mark in _FRACTION_MARKS:
            n = self._frac_len
            frac = s[20 : 20 + n]
            if len(frac) != n or not (frac.isdigit() and frac.isascii()) or s[20 + n : 21 + n] in _ZONE_OR_DIGIT:
                return None
            self._year, self._month = self._min_ym
            return self._min_val + int(sec) + int(frac) / _POW10[n]
        if mark in _ZONE_OR_DIGIT:
            return None
        self._year, self._month = self._min_ym
        return self._min_val + int(sec) + 0.0

    def _us(self, s: str) -> float | None:
        if s[:16] == self._min_key:
            found = self._same_minute(s)
            if found is not None:
                return found
        m = _US.match(s)
        if m is None:
            return None
        # Cached by the minute, as ISO stamps are: a whole-second offset
        # adds exactly, so the value is the one a datetime of the second gives.
        second = int(m.group(6))
        if second > 59:
            return None  # as datetime() would say
        key = s[m.start(): m.end(5)]
        if key != self._us_key:
            month, day, year = int(m.group(1)), int(m.group(2)), m.group(3)
            if month > 12 and day <= 12:  # a day-first locale
                month, day = day, month
            full_year = int(year) + 2000 if len(year) == 2 else int(year)
            try:
                value = self._epoch(full_year, month, day, int(m.group(4)), int(m.group(5)), 0, self._tz)
            except _ERRORS:
                return None
            self._us_key = key
            self._us_val = (value, full_year, month)
        value, self._year, self._month = self._us_val
        fraction = m.group(7)
        self._read_minute(key, self._us_val, fraction)
        return value + second + _fraction(fraction)

    def _json(self, s: str) -> float | None:
        m = _JSON_TIME.search(s)
        if m is None:
            return None
        text = m.group(1)
        if text is not None:
            text = text.strip()
            if text[:1] and text[:1] in _DIGITS:
                if text[4:5] == "-":
                    return self._iso(text)
                if "/" in text[1:3]:
                    return self._us(text)
            return None
        try:
            value = float(m.group(2))
        except ValueError:
            return None
        if _EPOCH_MS[0] <= value < _EPOCH_MS[1]:
            value /= 1000.0
        elif not _EPOCH_S[0] <= value < _EPOCH_S[1]:
            return None
        try:
            date = datetime.fromtimestamp(value, self._tz)
        except _ERRORS:
            return None
        self._year, self._month = date.year, date.month
        self._prev = value
        return value

    # -- glog: month and day only ------------------------------------------

    def _glog(self, s: str) -> float | None:
        m = _GLOG.match(s)
        if m is None:
            return None
        md = m.group(1)
        if len(md) == 4:
            month, day = int(md[:2]), int(md[2:])
        else:
            month, day = int(md[0]), int(md[1:])
        if not 1 <= month <= 12:
            return None
        year = self._year if self._year is not None else self._default_year
        if year is None:
            return None
        last = self._month
        if last is not None:
            # Rolled over New Year (Dec -> Jan), or a late line from the
            # year before (Jan -> Dec).
            if month < last - 6:
                year += 1
            elif month > last + 6:
                year -= 1
        key = (s[: m.end(4)], year)
        if key != self._glog_key:
            try:
                value = self._epoch(
                    year, month, day,
                    int(m.group(2)), int(m.group(3)), int(m.group(4)), self._tz,
                )
            except _ERRORS:
                return None
            self._glog_key = key
            self._glog_val = value
        self._year, self._month = year, month
        return self._glog_val + _fraction(m.group(5))

    def _epoch(self, year: int, month: int, day: int, hour: int, minute: int, second: int,
               tz: tzinfo | None) -> float:
        """Epoch of a wall time; a naive one is local time, as CONTRACTS asks.

        When clocks fall back, an hour of wall times happens twice (01:30
        EDT, then 01:30 EST an hour later) and a log's naive stamps repeat
        it. Read as the first one always, the second hour would jump the
        clock back an hour: so an ambiguous time takes the reading nearest
        the wall time converted before it (the log runs forward).
        """
        moment = datetime(year, month, day, hour, minute, second, tzinfo=tz)
        value = moment.timestamp()
        if not isinstance(tz, timezone):  # a zone with DST, or the local one
            later = moment.replace(fold=1).timestamp()
            # fold=1 reads later only inside a repeated hour (in the hour
            # skipped when clocks spring forward it reads earlier).
            prev = self._prev
            if later > value and prev is not None and abs(later - prev) < abs(value - prev):
                value = later
        self._prev = value
        return value
