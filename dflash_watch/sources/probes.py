"""Probe files (CONTRACTS section 9): the lines ``dflash_watch.probe`` writes.

Read like GPU sample files (``samples.py``): leniently, because the
training process appends to them for days and may be killed mid-write. A
line that is not a probe line is skipped and counted (the caller says so
once); a torn last line of a finished file is not counted as bad (a kill
mid-write leaves one); a bad optional field is dropped, not the line.
Following live files through rotation and truncation is the log tailer's
job (``live.py``), as for the GPU samples file.
"""

from __future__ import annotations

import glob
import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dflash_watch.parsers.events import ProbeSample

from .samples import json_count, timed_json_object
from .wakeups import is_glob

DEFAULT_GLOB = "dflash-probe-*.jsonl"
# Every integer field of a probe line (all optional, all >= 0).
INT_FIELDS = (
    "rank", "step", "tokens", "padded_tokens", "batch_size", "seq_len", "alloc_retries",
    "reserved_bytes", "allocated_bytes", "inactive_split_bytes", "recompiles", "graph_breaks",
)
# The training-health floats (issue 19). The loss and the grad norm are read
# whatever their value: a NaN or Inf loss is the very thing the ``loss``
# detector looks for, so it must survive the trip. The writer puts Python's
# JSON tokens (``NaN``, ``Infinity``, ``-Infinity``) there, which
# ``json.loads`` reads back as floats; the strings "nan"/"inf" that other
# writers use are taken too. Scales and seconds must be finite and >= 0.
_NON_FINITE = {"nan": math.nan, "-nan": math.nan, "inf": math.inf, "infinity": math.inf,
               "+inf": math.inf, "-inf": -math.inf, "-infinity": -math.inf}
_RANK_IN_NAME = re.compile(r"rank(\d+)")


def json_any_float(value: Any) -> float | None:
    """A float from JSON, NaN and Inf kept (as numbers or as their names)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # a 400-digit integer
            return None
    if isinstance(value, str):
        return _NON_FINITE.get(value.strip().lower())
    return None


def json_size(value: Any) -> float | None:
    """A finite float >= 0 from JSON (a scale, seconds), else None."""
    number = json_any_float(value)
    return number if number is not None and math.isfinite(number) and number >= 0 else None


def rank_from_name(path: str) -> int | None:
    """``dflash-probe-rank5.jsonl`` -> 5, for lines that carry no rank."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None


def parse_probe_line(line: str, source: str = "probe", rank: int | None = None) -> ProbeSample | None:
    """A ProbeSample from one line, or None if it is not a probe line.

    Only ``time`` (a finite number) is required; ``rank`` defaults to the
    one given (from the file's name).
    """
    timed = timed_json_object(line)
    if timed is None:
        return None
    data, t = timed
    fields = {name: json_count(data.get(name)) for name in INT_FIELDS}
    if fields["rank"] is None:
        fields["rank"] = rank
    get = data.get
    return ProbeSample(
        time=t, source=source, **fields,
        loss=json_any_float(get("loss")), grad_norm=json_any_float(get("grad_norm")),
        loss_scale=json_size(get("loss_scale")), step_seconds=json_size(get("step_seconds")),
        compute_seconds=json_size(get("compute_seconds")), wait_seconds=json_size(get("wait_seconds")),
    )


class ProbeParser:
    """``parse_probe_line`` with counts, for one file or one live stream.

    ``source`` of each sample is ``name:line`` (the evidence of an alert).
    """

    def __init__(self, path: str = "probe") -> None:
        self.name = os.path.basename(path) or path
        self.rank = rank_from_name(path)
        self.lines = 0
        self.samples = 0
        self.bad = 0
        self.first_bad: int | None = None

    def parse(self, line: str, lineno: int | None = None) -> ProbeSample | None:
        self.lines += 1
        if not line.strip():
            return None
        n = self.lines if lineno is None else lineno
        sample = parse_probe_line(line, f"{self.name}:{n}", self.rank)
        if sample is None:
            self.bad += 1
            if self.first_bad is None:
                self.first_bad = n
        else:
            self.samples += 1
        return sample

    def parse_text(self, text: str, first_lineno: int) -> list[ProbeSample]:
        """Complete lines of a chunk (as the tailer hands them) into samples."""
        out = []
        for i, line in enumerate(text.splitlines()):
            sample = self.parse(line, first_lineno + i)
            if sample is not None:
                out.append(sample)
        return out

    def summary(self) -> str | None:
        """One line about skipped lines, or None when there were none."""
        if not self.bad:
            return None
        return (f"{self.name}: {self.bad} of {self.lines} lines are not probe lines and were skipped "
                f"(first: line {self.first_bad})")


def read_probe_file(path: str | Path, parser: ProbeParser | None = None) -> Iterator[ProbeSample]:
    """Every probe line of a file, in file order (replay merges by time).

    A last line without its newline that does not parse is a write cut
    short, not a bad line. A missing file raises OSError.
    """
    parser = parser or ProbeParser(str(path))
    with open(path, encoding="utf-8", errors="replace", newline=None) as f:
        pending: str | None = None
        for line in f:
            if pending is not None:
                sample = parser.parse(pending)
                if sample is not None:
                    yield sample
            pending = line
        if pending is not None:
            if pending.endswith("\n") or parse_probe_line(pending) is not None:
                sample = parser.parse(pending)
                if sample is not None:
                    yield sample


def discover(patterns: Iterable[str], logs: Iterable[str] = (), cwd: str | None = None) -> list[str]:
    """Probe files and globs to read: the ones given, else ``dflash-probe-*.jsonl``
    beside each log and in the job's working directory (as globs, so that a
    rank's file that appears later is found too). Each once, in order."""
    out: list[str] = []
    given = [os.path.expanduser(p) for p in patterns]
    if given:
        candidates = given
    else:
        dirs = [os.path.dirname(os.path.abspath(os.path.expanduser(log))) for log in logs]
        if cwd:
            dirs.append(os.path.abspath(os.path.expanduser(cwd)))
        candidates = [os.path.join(d, DEFAULT_GLOB) for d in dirs]
    for c in candidates:
        if c not in out:
            out.append(c)
    return out


def expand(patterns: Iterable[str]) -> list[str]:
    """Globs as the files they name now (sorted), names as given; each once."""
    paths: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if is_glob(pattern) else [pattern]
        paths.extend(p for p in matches if p not in paths)
    return paths
