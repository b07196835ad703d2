"""Probe lines to a bounded file (CONTRACTS section 9), never raising.

The writer runs inside the user's training process, so a full disk, a
read-only directory or a file removed under it must cost the training
nothing: every failure is caught, said once on stderr, and the lines are
dropped (a probe that stops reporting is better than a run that stops).
The file is bounded: past ``max_bytes`` it is renamed to ``<path>.1``
(replacing an older one) and a fresh file starts, so a week-long run keeps
at most twice the cap on disk. The watcher follows the name through the
rename, as it follows a rotated log.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

DEFAULT_MAX_BYTES = 64 << 20
# Keys written without escaping on the fast path (CONTRACTS section 9).
_PLAIN_KEYS = frozenset((
    "time", "rank", "step", "tokens", "padded_tokens", "batch_size", "seq_len", "alloc_retries",
    "reserved_bytes", "allocated_bytes", "inactive_split_bytes", "recompiles", "graph_breaks",
    "loss", "grad_norm", "loss_scale", "step_seconds", "compute_seconds", "wait_seconds",
))
# The keys whose NaN or Inf is news, not a bug: a NaN loss must reach the
# watcher as NaN. JSON has no such number, so these are written as Python's
# json tokens ``NaN``/``Infinity``/``-Infinity`` (which ``json.loads`` and
# the watcher's reader take back as floats); anywhere else a non-finite
# float is refused as before (a NaN time is a bug to say, not a line).
NAN_KEYS = frozenset(("loss", "grad_norm", "loss_scale"))
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_NAN_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=True)


def _token(value: float) -> str:
    """A non-finite float as Python's json writes it."""
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def encode_line(line: Mapping[str, Any]) -> str:
    """One JSON object, no newline. Probe lines hold only known keys with
    ints and finite floats, and formatting those directly takes about half
    of ``json.dumps``' time (encoding is most of a flush's cost); any other
    line goes through the json module."""
    parts = []
    for key, value in line.items():
        kind = type(value)
        if key in _PLAIN_KEYS and (kind is int or (kind is float and math.isfinite(value))):
            parts.append(f'"{key}":{value!r}')
        elif kind is float and key in NAN_KEYS:
            parts.append(f'"{key}":{_token(value)}')
        else:
            return _slow(line)
    return "{" + ",".join(parts) + "}"


def _slow(line: Mapping[str, Any]) -> str:
    """Any line through the json module; NaN/Inf allowed only in ``NAN_KEYS``."""
    data = dict(line)
    for key, value in data.items():
        if key not in NAN_KEYS and isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"Out of range float values are not JSON compliant: {key}={value!r}")
    return _NAN_ENCODER.encode(data)


class ProbeWriter:
    """Appends probe lines to ``path``; rotates past ``max_bytes``.

    Also the face for a simulator or a script that already has the numbers:
    ``ProbeWriter(path).write_line({"time": t, "tokens": 900, ...})``.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                 warn: TextIO | None = None) -> None:
        self.path = os.fspath(path)
        self.max_bytes = max(1024, int(max_bytes))
        self._warn_to = warn
        self._warned = False
        self._file: TextIO | None = None
        self._size = 0
        self._closed = False
        self.written = 0  # lines written, for tests and the benchmark
        self.dropped = 0  # lines lost to errors

    def write_line(self, line: Mapping[str, Any]) -> None:
        """One probe line (a mapping with at least ``time``)."""
        self.write_lines((line,))

    def write_lines(self, lines: Iterable[Mapping[str, Any]]) -> None:
        """Several lines in one write (one system call per flush of the probe)."""
        try:
            text = "".join(encode_line(line) + "\n" for line in lines)
        except (TypeError, ValueError) as exc:  # a value JSON cannot hold: a bug to say, not to raise
            self._warn(f"a probe line could not be encoded ({exc})")
            return
        if not text:
            return
        count = text.count("\n")
        size = len(text.encode("utf-8"))
        if self._closed:
            self.dropped += count
            return
        try:
            f = self._open()
            if self._size and self._size + size > self.max_bytes:
                f = self._rotate()
            f.write(text)
            f.flush()
            self._size += size
            self.written += count
        except Exception as exc:  # noqa: BLE001 - never into training
            self.dropped += count
            self._drop_file()
            self._warn(f"cannot write probe lines to {self.path}: {exc}")

    def _open(self) -> TextIO:
        if self._file is None:
            parent = os.path.dirname(self.path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
            self._size = self._file.tell()
        return self._file

    def _rotate(self) -> TextIO:
        """``path`` -> ``path.1`` (the last full file is kept for a look), a fresh ``path``."""
        self._drop_file()
        os.replace(self.path, self.path + ".1")
        return self._open()

    def _drop_file(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass

    def _warn(self, message: str) -> None:
        """Once per writer: a training log is no place for a message per step."""
        if self._warned:
            return
        self._warned = True
        try:
            out = self._warn_to or sys.stderr
            out.write(f"dflash-watch probe: {message} (probe lines are dropped; training continues)\n")
            out.flush()
        except Exception:  # noqa: BLE001
            pass

    def close(self) -> None:
        self._closed = True
        self._drop_file()
