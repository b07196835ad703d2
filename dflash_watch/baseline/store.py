"""The baseline file: the reference profile of a good run (CONTRACTS section 6)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflash_watch.parsers.events import TOK_S

# Where ``baseline save`` writes and ``show``/``diff`` read when neither a
# flag nor the config's ``baseline_file`` names a file.
DEFAULT_PATH = "dflash-baseline.json"


class BaselineError(ValueError):
    """A baseline file that cannot be used, worded for one line on stderr."""


@dataclass(frozen=True, slots=True)
class Baseline:
    throughput_tokens_per_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "throughput_tokens_per_s": self.throughput_tokens_per_s, **self.extra}

    @property
    def unit(self) -> str:
        """The unit of the saved rate: a run that printed only it/s or
        samples/s saves that rate with ``throughput_unit`` beside it."""
        unit = self.extra.get("throughput_unit")
        return unit if isinstance(unit, str) and unit else TOK_S

    @property
    def tokens_per_s(self) -> float | None:
        """The tokens/s reference, or None when the saved rate is in another unit."""
        return self.throughput_tokens_per_s if self.unit == TOK_S else None


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    p = Path(path)
    from ..sources.samples import strict_json

    if p.exists() and not p.is_file():
        # A FIFO would block the read forever, /dev/zero would fill memory.
        raise BaselineError(f"baseline file {p}: not a regular file")
    try:
        # Nesting thousands deep, a 400-digit number: a bad file (one line,
        # exit 2), never a RecursionError or a later OverflowError.
        data = strict_json(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline file {p} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"baseline file {p}: {exc}") from None
    except ValueError as exc:  # JSONDecodeError, too deep, a number out of range
        raise BaselineError(f"baseline file {p}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BaselineError(f"baseline file {p}: expected a JSON object")
    if data.get("version") != 1:
        raise BaselineError(f"baseline file {p}: unsupported version {data.get('version')!r} (expected 1)")
    tps = data.get("throughput_tokens_per_s")
    if isinstance(tps, bool) or not isinstance(tps, (int, float)) or not math.isfinite(tps) or tps <= 0:
        raise BaselineError(f"baseline file {p}: throughput_tokens_per_s must be a positive number, got {tps!r}")
    for key, (low, high, what) in _RANGES.items():
        value = data.get(key)
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or not low < value <= high):
            raise BaselineError(f"baseline file {p}: {key} must be {what}, got {value!r}")
    extra = {k: v for k, v in data.items() if k not in ("version", "throughput_tokens_per_s")}
    return Baseline(float(tps), extra)


# Optional figures a diff compares (CONTRACTS section 6): where present,
# within (low, high]. A padding efficiency of 7 read as "700%".
_RANGES: dict[str, tuple[float, float, str]] = {
    "padding_efficiency": (0.0, 1.0, "a share in (0, 1]"),
    "step_interval_s": (0.0, math.inf, "a positive number of seconds"),
}


def save_baseline(baseline: Baseline, path: str | os.PathLike[str]) -> None:
    """Write atomically (a temp file beside it, then ``os.replace``) so a
    dashboard reading it never sees half a file, and a crash mid-write
    leaves the old baseline whole. ``allow_nan=False``: a NaN would make
    the file invalid JSON for every other reader."""
    import tempfile  # (here: with random and shutil, a few ms of every command's start, for a save)

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(baseline.to_dict(), fh, indent=2, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
