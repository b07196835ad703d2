"""The config file (TOML) and its merge with command-line flags.

One frozen object describes a watch: which logs, which GPUs, which job,
which thresholds. Flags override the file; the file overrides defaults.
A bad file is a one-line ``ConfigError`` naming the key, never a traceback.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

DEFAULT_CONFIG_PATHS = ("dflash-watch.toml", "~/.config/dflash-watch/config.toml")


class ConfigError(ValueError):
    """A config problem, worded for a one-line message on stderr."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    command: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    session: str = "dflash-train"
    socket: str | None = None
    window: str | None = None
    grace_s: float = 30.0
    state_dir: str | None = None
    gpus: tuple[int, ...] | None = None
    preflight_timeout_s: float = 60.0
    auto_relaunch: bool = False
    max_restarts: int = 3


@dataclass(frozen=True, slots=True)
class GpuConfig:
    enabled: bool = True
    interval_s: float = 1.0
    indices: tuple[int, ...] | None = None
    samples_file: str | None = None
    record_file: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    logs: tuple[str, ...] = ()
    tz: str | None = None
    progress_regex: str | None = None
    baseline_file: str | None = None
    alerts_file: str | None = None
    run: RunConfig = field(default_factory=RunConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    detectors: dict[str, Any] = field(default_factory=dict)
    path: str | None = None


def _expect(value: Any, kind: type | tuple[type, ...], key: str) -> Any:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(f"{key}: expected {names}, got {type(value).__name__} {value!r}")
    return value


def _section(cls: type, data: dict[str, Any], prefix: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f"{prefix}.{key}: unknown key (known: {', '.join(sorted(known))})")
        kwargs[key] = value
    obj = cls(**kwargs)
    for f in fields(cls):
        value = getattr(obj, f.name)
        default = getattr(cls(), f.name)
        if value is None or default is None:
            continue
        want: type | tuple[type, ...] = type(default)
        if want is float:
            want = (int, float)
        if want is tuple:
            want = (list, tuple)
        _expect(value, want, f"{prefix}.{f.name}")
    return obj


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read a config file; with ``path`` None, the first default that exists."""
    if path is None:
        for candidate in DEFAULT_CONFIG_PATHS:
            p = Path(candidate).expanduser()
            if p.is_file():
                path = p
                break
        else:
            return Config()
    p = Path(path).expanduser()
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {p} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {p}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {p}: invalid TOML: {exc}") from None
    return parse_config(raw, str(p))


def parse_config(raw: dict[str, Any], path: str | None = None) -> Config:
    raw = dict(raw)
    run_raw = dict(_expect(raw.pop("run", {}), dict, "run"))
    if run_raw.get("gpus") is not None:
        gpus = _expect(run_raw["gpus"], list, "run.gpus")
        for i in gpus:
            _expect(i, int, "run.gpus[]")
        run_raw["gpus"] = tuple(gpus)
    gpu_raw = dict(_expect(raw.pop("gpu", {}), dict, "gpu"))
    detectors = _expect(raw.pop("detectors", {}), dict, "detectors")
    if "indices" in gpu_raw and gpu_raw["indices"] is not None:
        indices = _expect(gpu_raw["indices"], list, "gpu.indices")
        for i in indices:
            _expect(i, int, "gpu.indices[]")
        gpu_raw["indices"] = tuple(indices)
    logs = raw.pop("logs", ())
    if isinstance(logs, str):
        logs = (logs,)
    logs = tuple(_expect(x, str, "logs[]") for x in _expect(logs, (list, tuple), "logs"))
    top: dict[str, Any] = {}
    for key in ("tz", "progress_regex", "baseline_file", "alerts_file"):
        if key in raw:
            top[key] = _expect(raw.pop(key), str, key)
    if raw:
        raise ConfigError(f"{sorted(raw)[0]}: unknown key in {path or 'config'}")
    run = _section(RunConfig, run_raw, "run")
    env = _expect(run.env, dict, "run.env")
    for k, v in env.items():
        _expect(v, str, f"run.env.{k}")
    return Config(
        logs=logs,
        run=run,
        gpu=_section(GpuConfig, gpu_raw, "gpu"),
        detectors=dict(detectors),
        path=path,
        **top,
    )


def with_overrides(config: Config, **flags: Any) -> Config:
    """Apply command-line flags (None means "not given") over a config."""
    run_kw = {k: v for k, v in flags.items() if k in {"command", "cwd", "session", "socket", "grace_s"} and v is not None}
    gpu_kw = {k: v for k, v in flags.items() if k in {"samples_file", "record_file", "interval_s"} and v is not None}
    top_kw = {k: v for k, v in flags.items() if k in {"logs", "tz", "baseline_file", "alerts_file", "progress_regex"} and v}
    if "logs" in top_kw:
        top_kw["logs"] = tuple(top_kw["logs"])
    if flags.get("no_gpu"):
        gpu_kw["enabled"] = False
    return replace(
        config,
        run=replace(config.run, **run_kw),
        gpu=replace(config.gpu, **gpu_kw),
        **top_kw,
    )


EXAMPLE_CONFIG = """\
# dflash-watch config. Every key is optional; flags override this file.

# Logs to follow, like `tail -F`; globs pick up one file per rank.
logs = ["logs/train.log", "logs/rank*.log"]

# Time zone of naive log timestamps (default: this machine's local zone).
# tz = "UTC"

# A regex with named groups (step, total, tokens_per_s, loss) when the
# built-in progress formats do not fit your log.
# progress_regex = 'it (?P<step>\\d+) .* (?P<tokens_per_s>[\\d.]+) tok/s'

# A saved profile of a good run: `dflash-watch baseline save`.
# baseline_file = "dflash-baseline.json"

# Every alert, one JSON line each (CONTRACTS section 2).
# alerts_file = "dflash-alerts.jsonl"

[run]
# The training command, run in tmux by start / relaunch.
command = "torchrun --nproc-per-node 8 train_dflash.py --config configs/drafter.yaml"
cwd = "."
session = "dflash-train"
# socket = "dflash"          # tmux -L socket name, for a private server
grace_s = 30.0               # Ctrl-C, then this long, then SIGTERM, then SIGKILL
auto_relaunch = false
max_restarts = 3

[run.env]
# PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True"

[gpu]
interval_s = 1.0
# indices = [0, 1, 2, 3, 4, 5, 6, 7]
# samples_file = "gpu.jsonl"   # read samples from a file instead of NVML
# record_file = "gpu.jsonl"    # also append every NVML sample here

[detectors]
# throughput_drop_fraction = 0.30
"""
