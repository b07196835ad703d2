"""A run's profile as the diagnosis reads it: the baseline file's keys
(CONTRACTS section 6) as typed values, whatever wrote them.

Both sides of "what changed" have this shape: the good run's profile from
its baseline file, the current run's built the same way from its logs and
environment. Every field may be None: an old baseline has only its
throughput, a venv named with ``--env`` has no process environment. A
missing figure is unknown and never compared; a value of the wrong type
(a newer or hand-edited file) reads as missing, never as an error.

>>> p = Profile.from_mapping({"throughput_tokens_per_s": 21500.0, "padding_efficiency": 0.93,
...                           "fingerprint": {"packages": {"Transformers": "5.8.1"}}})
>>> p.throughput, p.padding_efficiency, p.fingerprint.packages
(21500.0, 0.93, {'transformers': '5.8.1'})
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..parsers.events import TOK_S

_SEPARATORS = re.compile(r"[-_.]+")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _str_map(value: Any, canonical: bool = False) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    out = {}
    for k, v in value.items():
        if isinstance(k, str) and isinstance(v, str):
            out[_SEPARATORS.sub("-", k).lower() if canonical else k] = v
    return out


@dataclass(frozen=True, slots=True)
class GpuMemory:
    """A GPU's flat level after warm-up and the band it moves in."""

    level_bytes: float
    band_bytes: float


@dataclass(frozen=True, slots=True)
class EnvFingerprint:
    """The ``fingerprint`` key: None where the side could not see it."""

    python: str | None = None
    torch: str | None = None
    torch_git: str | None = None
    cuda: str | None = None
    has_torch: bool = False
    packages: dict[str, str] | None = None
    env: dict[str, str] | None = None
    files: dict[str, str] | None = None
    launch_args: tuple[str, ...] | None = None
    cache_path: str | None = None
    cache_bytes: float | None = None
    cache_entries: float | None = None

    @classmethod
    def from_mapping(cls, data: Any) -> EnvFingerprint | None:
        if not isinstance(data, Mapping):
            return None
        args = data.get("launch_args")
        cache = data.get("compile_cache")
        cache = cache if isinstance(cache, Mapping) else {}
        return cls(
            python=_str(data.get("python")),
            torch=_str(data.get("torch")),
            torch_git=_str(data.get("torch_git")),
            cuda=_str(data.get("cuda")),
            has_torch=isinstance(data.get("torch"), str),
            packages=_str_map(data.get("packages"), canonical=True),
            env=_str_map(data.get("env")),
            files=_str_map(data.get("files")),
            launch_args=tuple(args) if isinstance(args, list) and all(isinstance(a, str) for a in args) else None,
            cache_path=_str(cache.get("path")),
            cache_bytes=_num(cache.get("bytes")),
            cache_entries=_num(cache.get("entries")),
        )


@dataclass(frozen=True, slots=True)
class Profile:
    """The figures of one run (its steady state after warm-up)."""

    throughput: float | None = None
    throughput_unit: str = TOK_S
    throughput_p10: float | None = None
    throughput_p90: float | None = None
    # Median rate during the warm-up: how slow the first steps were.
    warmup_throughput: float | None = None
    step_interval_s: float | None = None
    padding_efficiency: float | None = None
    recompiles_per_hour: float | None = None
    alloc_retries_per_hour: float | None = None
    gpu_memory: tuple[tuple[str, GpuMemory], ...] = ()
    fingerprint: EnvFingerprint | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Profile:
        memory = []
        raw = data.get("gpu_memory")
        if isinstance(raw, Mapping):
            for gpu, m in raw.items():
                if isinstance(m, Mapping):
                    level, band = _num(m.get("level_bytes")), _num(m.get("band_bytes"))
                    if level is not None and band is not None:
                        memory.append((str(gpu), GpuMemory(level, band)))
        memory.sort(key=lambda kv: (len(kv[0]), kv[0]))
        padding = _num(data.get("padding_efficiency"))
        return cls(
            throughput=_num(data.get("throughput_tokens_per_s")),
            throughput_unit=_str(data.get("throughput_unit")) or TOK_S,
            throughput_p10=_num(data.get("throughput_p10")),
            throughput_p90=_num(data.get("throughput_p90")),
            warmup_throughput=_num(data.get("warmup_throughput_tokens_per_s")),
            step_interval_s=_num(data.get("step_interval_s")),
            padding_efficiency=padding if padding is None or 0.0 <= padding <= 1.0 else None,
            recompiles_per_hour=_num(data.get("recompiles_per_hour")),
            alloc_retries_per_hour=_num(data.get("alloc_retries_per_hour")),
            gpu_memory=tuple(memory),
            fingerprint=EnvFingerprint.from_mapping(data.get("fingerprint")),
        )
