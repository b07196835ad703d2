"""The config file (TOML) and its merge with command-line flags.

One frozen object describes a watch: which logs, which GPUs, which job,
which thresholds. Flags override the file; the file overrides defaults.
A bad file is a one-line ``ConfigError`` naming the key, never a traceback:
``[detectors] throughput_drop_frac = 1.5: must be in (0, 1)``.

Every number a user may set is declared once, with its valid range and a
line of documentation: the thresholds where the detectors keep them
(``detectors.config.DetectorConfig``, each a ``knob``; ``DETECTOR_KEYS`` is
read from it), ``RUN_RANGES`` and ``GPU_RANGES`` here. The same declaration
checks a file and writes the ``[detectors]`` part of the template that
``dflash-watch init`` prints (``config_template``), so the two cannot drift.

Where the file is, when ``--config`` is not given (``default_config_paths``;
the first that exists wins, and the template's first lines say the same):

1. ``./dflash-watch.toml``;
2. ``$XDG_CONFIG_HOME/dflash-watch/dflash-watch.toml``, then ``config.toml``
   in the same folder (``XDG_CONFIG_HOME`` unset, empty or relative:
   ``~/.config``);
3. ``~/.config/dflash-watch/config.toml``, the place read before
   ``XDG_CONFIG_HOME`` was honoured.

The checks and one-line errors every table shares (``ConfigError``,
``Range``, ``bad``, ``unknown``) live in ``dflash_watch.checks``, below this
module and ``sinks.settings`` alike, so neither imports the other's privates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

# The shared checks and their error (ConfigError is raised from here too).
from .checks import (
    NON_NEGATIVE,
    POSITIVE,
    ConfigError,
    Range,
    bad,
    unknown,
)
from .detectors.config import DetectorConfig
from .keymap import check_keys

# Where a command looks for its config when --config is not given, first
# found wins (``default_config_paths`` builds the list from the environment).
CONFIG_NAME = "dflash-watch.toml"
# The places read before XDG_CONFIG_HOME was honoured: still read, in this order.
DEFAULT_CONFIG_PATHS = (CONFIG_NAME, "~/.config/dflash-watch/config.toml")


def config_home() -> Path:
    """``$XDG_CONFIG_HOME``, or ``~/.config`` when it is unset, empty or relative.

    The XDG base directory spec says a relative value is invalid and must be
    ignored, like an empty one."""
    value = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(value) if value and os.path.isabs(value) else Path("~/.config").expanduser()


def default_config_paths() -> tuple[Path, ...]:
    """Every place a config is looked for, first found wins, each once.

    1. ``./dflash-watch.toml`` (the run's own directory, what ``init`` writes);
    2. ``$XDG_CONFIG_HOME/dflash-watch/dflash-watch.toml``, then ``config.toml``
       beside it (``~/.config`` when ``XDG_CONFIG_HOME`` is unset or empty);
    3. ``~/.config/dflash-watch/config.toml``, where the tool looked before it
       honoured ``XDG_CONFIG_HOME``: a file there keeps working.
    """
    home = config_home() / "dflash-watch"
    candidates = [Path(CONFIG_NAME), home / CONFIG_NAME, home / "config.toml",
                  *(Path(p).expanduser() for p in DEFAULT_CONFIG_PATHS[1:])]
    out: list[Path] = []
    for p in candidates:
        if p not in out:
            out.append(p)
    return tuple(out)


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
    # A stall that stays firing on_stall_grace_s: "alert" only, or "abort" /
    # "relaunch" the job (a relaunch counts toward the crash-loop guard).
    on_stall: str = "alert"
    on_stall_grace_s: float = 300.0
    # The same failure (crash signature, or a hang) this many times within
    # crash_loop_window_s stops auto-relaunch and on_stall, with an alert.
    crash_loop_count: int = 3
    crash_loop_window_s: float = 600.0
    # Tokens in one optimizer step, or in one sample: turns a run's it/s or
    # samples/s into tokens/s, so that a tokens/s baseline applies to it.
    tokens_per_step: float | None = None
    tokens_per_sample: float | None = None


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
    # Checked overrides of DetectorConfig, by field name (aliases resolved).
    detectors: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    # ``[alerts]``: the sinks (``sinks.settings.AlertsConfig``), checked.
    alerts: Any = field(default_factory=lambda: _no_alerts())
    # ``[keys]``: the dashboard's rebound keys, binding id -> Textual key
    # string (``keymap.check_keys``), for ``App.set_keymap``.
    keys: dict[str, str] = field(default_factory=dict)


def _no_alerts() -> Any:
    """An empty ``AlertsConfig`` (imported late: ``--help`` and ``init`` need no detector names)."""
    from .sinks.settings import AlertsConfig

    return AlertsConfig()


# -- declared ranges ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Threshold:
    """One ``[detectors]`` key: its valid range and what it means."""

    range: Range
    doc: str


def _detector_keys() -> dict[str, Threshold]:
    """``[detectors]``, read from its one declaration: each ``knob`` field of
    ``DetectorConfig`` (default, valid values, doc line), in field order.

    The range checks a config file and, with the doc, writes the template."""
    return {f.name: Threshold(Range.parse(f.metadata["valid"]), f.metadata["doc"])
            for f in fields(DetectorConfig) if "valid" in f.metadata}


DETECTOR_KEYS: dict[str, Threshold] = _detector_keys()

# Fields of DetectorConfig that are not [detectors] keys, and where they come from.
DETECTOR_DERIVED: dict[str, str] = {"tz": "the top-level tz key"}

# Names a template once printed, still read: an old file keeps loading.
DETECTOR_ALIASES: dict[str, str] = {"throughput_drop_fraction": "throughput_drop_frac"}

RUN_RANGES: dict[str, Range] = {
    "grace_s": NON_NEGATIVE,
    "preflight_timeout_s": POSITIVE,
    "max_restarts": Range(0.0, integer=True),
    "on_stall_grace_s": NON_NEGATIVE,
    "crash_loop_count": Range(2.0, integer=True),
    "crash_loop_window_s": POSITIVE,
    "tokens_per_step": POSITIVE,
    "tokens_per_sample": POSITIVE,
}
GPU_RANGES: dict[str, Range] = {"interval_s": POSITIVE}
ON_STALL_ACTIONS = ("alert", "abort", "relaunch")  # [run] on_stall (control/on_stall.py)

_TOP_KEYS = ("logs", "tz", "progress_regex", "baseline_file", "alerts_file", "run", "gpu", "detectors", "alerts", "keys")


# -- checking --------------------------------------------------------------------


def check_detectors(raw: dict[str, Any]) -> dict[str, Any]:
    """``[detectors]`` as checked DetectorConfig overrides, by field name."""
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in raw.items():
        name = DETECTOR_ALIASES.get(key, key)
        if name in DETECTOR_DERIVED:
            raise ConfigError(f"[detectors] {key}: not a threshold; set {DETECTOR_DERIVED[name]} instead")
        spec = DETECTOR_KEYS.get(name)
        if spec is None:
            raise unknown("detectors", key, [*DETECTOR_KEYS, *DETECTOR_ALIASES])
        if name in given_as:
            raise ConfigError(f"[detectors] {key}: set twice (also as {given_as[name]})")
        why = spec.range.problem(value)
        if why:
            raise bad("detectors", key, value, why)
        out[name] = spec.range.coerce(value)
        given_as[name] = key
    return out


def _kind(type_text: str) -> str:
    """What a RunConfig/GpuConfig field takes, from its annotation."""
    for word in ("bool", "float", "int", "dict", "tuple", "str"):
        if type_text.startswith(word):
            return word
    raise AssertionError(f"config field of unhandled type {type_text}")  # a new field's type


def _section(cls: type, data: dict[str, Any], section: str, ranges: dict[str, Range]) -> Any:
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        f = known.get(key)
        if f is None:
            raise unknown(section, key, list(known))
        kind = _kind(str(f.type))
        if key in ranges:
            why = ranges[key].problem(value)
            if why:
                raise bad(section, key, value, why)
            value = ranges[key].coerce(value)
        elif kind == "bool" and not isinstance(value, bool):
            raise bad(section, key, value, "must be true or false")
        elif kind == "str" and not isinstance(value, str):
            raise bad(section, key, value, "must be a string")
        elif kind == "dict":
            if not isinstance(value, dict):
                raise bad(section, key, value, "must be a table")
            for k, v in value.items():
                if not isinstance(v, str):
                    raise bad(f"{section}.{key}", k, v, "must be a string")
        elif kind == "tuple":
            if not isinstance(value, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in value):
                raise bad(section, key, value, "must be a list of whole numbers")
            value = tuple(value)
        elif kind in ("int", "float"):  # a number without a declared range
            raise AssertionError(f"[{section}] {key} has no declared range")
        kwargs[key] = value
    return cls(**kwargs)


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read a config file; with ``path`` None, the first of ``default_config_paths()`` that exists."""
    if path is None:
        for p in default_config_paths():
            if p.is_file():
                path = p
                break
        else:
            return Config()
    import tomllib  # (here: only a file read needs it, and its import is a few ms of every start)

    p = Path(path).expanduser()
    if p.exists() and not p.is_file():  # a FIFO blocks the read, /dev/zero fills memory
        raise ConfigError(f"config file {p}: not a regular file")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {p} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {p}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {p}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise ConfigError(f"config file {p}: invalid TOML: arrays or tables nested too deep") from None
    except MemoryError:
        raise ConfigError(f"config file {p}: too large to read") from None
    return parse_config(raw, str(p))


def _table(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.pop(key, {})
    if not isinstance(value, dict):
        raise bad(None, key, value, f"must be a table ([{key}])")
    return dict(value)


def parse_config(raw: dict[str, Any], path: str | None = None) -> Config:
    raw = dict(raw)
    run_raw = _table(raw, "run")
    gpu_raw = _table(raw, "gpu")
    detectors = check_detectors(_table(raw, "detectors"))
    # Late, as in _no_alerts; sinks.settings imports only .checks, never this module.
    from .sinks.settings import parse_alerts

    alerts = parse_alerts(_table(raw, "alerts"))
    keys = check_keys(_table(raw, "keys"))
    logs = raw.pop("logs", [])
    if isinstance(logs, str):
        logs = [logs]
    if not isinstance(logs, list) or not all(isinstance(x, str) for x in logs):
        raise bad(None, "logs", logs, "must be a path or a list of paths (strings)")
    top: dict[str, Any] = {}
    for key in ("tz", "progress_regex", "baseline_file", "alerts_file"):
        if key in raw:
            value = raw.pop(key)
            if not isinstance(value, str):
                raise bad(None, key, value, "must be a string")
            top[key] = value
    if raw:
        raise unknown(None, next(iter(raw)), list(_TOP_KEYS))
    run = _section(RunConfig, run_raw, "run", RUN_RANGES)
    if run.on_stall not in ON_STALL_ACTIONS:
        raise bad("run", "on_stall", run.on_stall, "must be one of " + ", ".join(f'"{a}"' for a in ON_STALL_ACTIONS))
    return Config(
        logs=tuple(logs),
        run=run,
        gpu=_section(GpuConfig, gpu_raw, "gpu", GPU_RANGES),
        detectors=detectors,
        path=path,
        alerts=alerts,
        keys=keys,
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
