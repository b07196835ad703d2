"""GPU sample files (CONTRACTS section 3): record them, parse them, replay them.

A sample file lets a run on a GPU-less machine (a replay, a laptop) see the
same memory the live watcher saw, through the same Monitor path. Reading is
lenient because these files are appended to for days and may end in a torn
line or carry hand edits: a bad line is skipped and counted, never fatal.
Writing never raises either: a full disk must not stop the watcher.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO, cast

from dflash_watch.parsers.events import GpuLost, GpuProcess, GpuSample

SOURCE = "gpu-samples"


def format_sample_line(sample: GpuSample) -> str:
    """One JSON line (no newline); optional keys only when known."""
    data: dict[str, Any] = {
        "time": sample.time,
        "gpu": sample.gpu,
        "used_bytes": sample.used_bytes,
        "total_bytes": sample.total_bytes,
    }
    if sample.util is not None:
        data["util"] = round(sample.util, 4)
    if sample.processes is not None:
        procs = []
        for p in sample.processes:
            row: dict[str, Any] = {"pid": p.pid, "used_bytes": p.used_bytes, "name": p.name}
            if p.job:
                row["job"] = True
            procs.append(row)
        data["processes"] = procs
    for key in HEALTH_KEYS:
        value = getattr(sample, key)
        if value is not None:
            data[key] = list(value) if type(value) is tuple else value
    return json.dumps(data, ensure_ascii=False, separators=(", ", ": "))


# -- health fields (CONTRACTS section 3, added by issue 19) -----------------
# Each is optional: absent when the card did not say, and a bad value is
# dropped (None), never a reason to lose the sample's memory reading.
THROTTLE_NAMES = frozenset({"thermal", "power_cap", "hw_slowdown", "power_brake", "sw_thermal"})
_FLOATS = ("temp_c", "power_w", "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz")
_COUNTS = ("ecc_uncorrected", "retired_pages", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max")
_BOOLS = ("remap_pending", "lost")
# In the order a line writes them (GpuSample's order).
HEALTH_KEYS = (
    "temp_c", "power_w", "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz", "throttle", "ecc_uncorrected",
    "remap_pending", "retired_pages", "xid", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "lost",
)
_BASE_KEYS = frozenset({"time", "gpu", "used_bytes", "total_bytes", "util", "processes"})


def _health(data: dict[str, Any]) -> dict[str, Any]:
    """The GpuSample health keyword arguments of a line (only those it has, valid)."""
    out: dict[str, Any] = {}
    for key in _FLOATS:
        v = data.get(key)
        if v is not None and not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v):
            out[key] = float(v)
    for key in _COUNTS:
        n = json_count(data.get(key))
        if n is not None:
            out[key] = n
    for key in _BOOLS:
        v = data.get(key)
        if isinstance(v, bool):
            out[key] = v
    throttle = data.get("throttle")
    if isinstance(throttle, list):
        out["throttle"] = tuple(r for r in throttle if isinstance(r, str) and r in THROTTLE_NAMES)
    xid = data.get("xid")
    if isinstance(xid, list):
        codes = tuple(c for c in map(json_count, xid) if c is not None)
        if codes:
            out["xid"] = codes
    return out


def json_count(value: Any) -> int | None:
    """A non-negative integer from JSON (bools and negatives are not counts);
    shared by the GPU sample and probe line readers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


# The largest integer any field of ours holds (bytes, tokens, steps, pids,
# epoch milliseconds): a signed 64-bit counter. A longer number is damage
# or a hostile line, and Python would carry it on as an int that no float
# can hold (an OverflowError deep inside a detector).
MAX_JSON_INT = 2**63 - 1


def _int(text: str) -> int:
    # Length first: int() of a 5,000-digit text is itself an error (and slow).
    if len(text) > 20 or not -MAX_JSON_INT - 1 <= (value := int(text)) <= MAX_JSON_INT:
        raise ValueError(f"number out of range: {text[:24]}...")
    return value


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: a literal too large to be a measurement
        raise ValueError(f"number out of range: {text[:24]}")
    return value


def strict_json(text: str) -> Any:
    """``json.loads`` for files other programs (or people) write, which must
    never take the reader down: nesting too deep for the parser's recursion
    (``[[[[...`` 5,000 deep) and numbers no counter or float can hold (a
    400-digit integer, ``1e400``) raise ``ValueError`` like any other bad
    JSON, instead of ``RecursionError`` here or ``OverflowError`` later."""
    try:
        return json.loads(text, parse_int=_int, parse_float=_float)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def _huge(value: Any) -> bool:
    return type(value) is int and not -MAX_JSON_INT - 1 <= value <= MAX_JSON_INT


def _holds_huge_int(data: dict[str, Any]) -> bool:
    """An integer past 64 bits among the values a line reader looks at: the
    object's own and those of the rows of its lists (``processes``)."""
    for value in data.values():
        if _huge(value):
            return True
        if type(value) is list:
            for row in value:
                if _huge(row) or (type(row) is dict and any(_huge(v) for v in row.values())):
                    return True
    return False


def timed_json_object(line: str) -> tuple[dict[str, Any], float] | None:
    """(the object, its ``time``) of one JSON line whose ``time`` is a finite
    number; None for anything else. Shared by the GPU sample and probe line
    readers: both require exactly this and treat the rest field by field.
    Never raises: a line nested thousands deep or holding a 400-digit
    number is a bad line (skipped and counted), not the reader's end."""
    try:
        # Not ``strict_json``: its number hooks make a line 1.7x slower to
        # read, and a 5-day sample file holds millions. The numbers a reader
        # uses are checked below instead (a 1e400 is inf, refused as any).
        data = json.loads(line)
    except (ValueError, RecursionError):  # also JSONDecodeError, bad UTF-8 surrogates, too deep
        return None
    if not isinstance(data, dict) or _holds_huge_int(data):
        return None
    t = data.get("time")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        return None
    return data, float(t)


def parse_sample_line(line: str, source: str = SOURCE) -> GpuSample | None:
    """A GpuSample from one line, or None if the line is not a usable sample.

    ``time`` (finite number) and ``gpu`` (index >= 0) are required; a bad
    optional field is dropped (None), not a reason to lose the sample, since
    a memory value is worth keeping even if its process list is garbled.
    """
    timed = timed_json_object(line)
    if timed is None:
        return None
    data, t = timed
    gpu = json_count(data.get("gpu"))
    if gpu is None:
        return None
    util = data.get("util")
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0.0 <= util <= 1.0:
        util = None
    # Health keys only when the line has keys beyond the base ones: most
    # sample files (and every older one) have none, and they are read by millions.
    health = {} if _BASE_KEYS.issuperset(data) else _health(data)
    return GpuSample(
        time=t,
        gpu=gpu,
        used_bytes=json_count(data.get("used_bytes")),
        total_bytes=json_count(data.get("total_bytes")),
        util=None if util is None else float(util),
        processes=_processes(data.get("processes")),
        source=source,
        **health,
    )


def _processes(value: Any) -> tuple[GpuProcess, ...] | None:
    if not isinstance(value, list):
        return None
    out = []
    for row in value:
        if not isinstance(row, dict):
            continue
        pid = json_count(row.get("pid"))
        if pid is None:
            continue
        used = json_count(row.get("used_bytes"))
        name = row.get("name")
        out.append(GpuProcess(pid, used or 0, name if isinstance(name, str) else "", row.get("job") is True))
    return tuple(out)


class SampleParser:
    """``parse_sample_line`` with counts, for one file or one live stream."""

    def __init__(self, source: str = SOURCE, path: str | None = None) -> None:
        self.source = source
        # The file, named in ``summary`` (replay may read several).
        self.path = path
        self.lines = 0
        self.samples = 0
        self.bad = 0
        self.first_bad: int | None = None  # line number, for the one message to show

    def parse(self, line: str) -> GpuSample | None:
        self.lines += 1
        if not line.strip():
            return None  # blank lines are not "bad"
        sample = parse_sample_line(line, self.source)
        if sample is None:
            self.bad += 1
            if self.first_bad is None:
                self.first_bad = self.lines
        else:
            self.samples += 1
        return sample

    def summary(self) -> str | None:
        """One line about skipped lines, or None when there were none."""
        if not self.bad:
            return None
        where = f"{self.path}: " if self.path else ""
        return (f"{where}{self.bad} of {self.lines} lines are not GPU samples and were skipped "
                f"(first: line {self.first_bad})")


def read_sample_file(path: str | Path, parser: SampleParser | None = None) -> Iterator[GpuSample]:
    """Every sample of a file, in file order (replay merges by time itself).

    Pass a ``SampleParser`` to learn how many lines were skipped. A missing
    file raises OSError: that is a usage error for the caller to report.
    """
    parser = parser or SampleParser()
    with open(path, encoding="utf-8", errors="replace", newline=None) as f:
        for line in f:
            sample = parser.parse(line)
            if sample is not None:
                yield sample


class SampleRecorder:
    """Appends samples to a file, one batch per flush; never raises.

    Opened in append mode so a restarted watcher continues the same file.
    After an error the recorder keeps trying (a disk that fills may empty
    again) but reports only once until a write succeeds.
    """

    def __init__(self, path: str | Path, on_notice: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self._on_notice = on_notice
        self._notices: list[str] = []
        self._failing = False
        self._file: TextIO | None = None
        self._closed = False
        self.written = 0
        self._open()

    def _open(self) -> bool:
        if self._file is not None:
            return True
        if self._closed:
            return False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8", buffering=1)
            return True
        except OSError as err:
            self._fail(err)
            return False

    def write(self, samples: Iterable[GpuSample | GpuLost]) -> None:
        lines = [format_sample_line(s) + "\n" for s in samples if isinstance(s, GpuSample)]
        if not lines or not self._open():
            return
        try:
            # _open() returned True, so the file is open (cast: mypy cannot follow that).
            cast(TextIO, self._file).write("".join(lines))
            cast(TextIO, self._file).flush()
        except (OSError, ValueError) as err:  # ValueError: written after close
            self._fail(err)
            self._close_quietly()
            return
        self.written += len(lines)
        self._failing = False

    def _fail(self, err: Exception) -> None:
        if self._failing:
            return
        self._failing = True
        message = f"cannot record GPU samples to {self.path}: {err}; recording continues when it can"
        self._notices.append(message)
        if self._on_notice is not None:
            try:
                self._on_notice(message)
            except Exception:
                pass

    def drain_notices(self) -> list[str]:
        out, self._notices = self._notices, []
        return out

    def _close_quietly(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        self._closed = True
        self._close_quietly()

    def __enter__(self) -> SampleRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
