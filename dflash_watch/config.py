"""The config file (TOML) and its merge with command-line flags.

One frozen object describes a watch: which logs, which GPUs, which job,
which thresholds. Flags override the file; the file overrides defaults.
A bad file is a one-line ``ConfigError`` naming the key, never a traceback:
``[detectors] throughput_drop_frac = 1.5: must be in (0, 1)``.

Every number a user may set is declared once, with its valid range and a
line of documentation (``DETECTOR_KEYS``, ``RUN_RANGES``, ``GPU_RANGES``):
the same declaration checks a file and writes the ``[detectors]`` part of
the template that ``dflash-watch init`` prints (``config_template``), so the
two cannot drift.

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
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

# ConfigError, Range and the ranges stay importable from here, as before.
from .checks import (
    COUNT,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SHARE,
    UNIT,
    ConfigError,
    Range,
    bad,
    unknown,
)
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


# Every field of detectors.config.DetectorConfig, declared here once: the range
# checks a config file and, with the doc, writes the template. A field added
# there without a line here fails tests/shell/test_config.py.
DETECTOR_KEYS: dict[str, Threshold] = {
    # memory, shared by the three memory detectors
    "mem_flat_band_gib": Threshold(POSITIVE, "memory counts as flat inside this band (GiB) ..."),
    "mem_flat_band_frac": Threshold(FRACTION, "... or this share of the GPU's memory, whichever is larger"),
    "mem_settle_s": Threshold(POSITIVE, "warm-up ends once memory stayed flat this long"),
    "mem_warmup_max_s": Threshold(POSITIVE, "or this long after the job appeared, settled or not"),
    "mem_idle_gib": Threshold(NON_NEGATIVE, "below this (GiB) a GPU runs no job; falling to it is a relaunch"),
    "mem_noise_band_factor": Threshold(NON_NEGATIVE, "the flat band is at least this many times the noise (0: off)"),
    "mem_relaunch_idle_s": Threshold(POSITIVE, "idle this long without progress is a relaunch (no process list)"),
    # memory_volatility
    "volatility_min_turns": Threshold(COUNT, "memory_volatility: this many up/down turns ..."),
    "volatility_window_s": Threshold(POSITIVE, "... within this many seconds"),
    "volatility_resolve_s": Threshold(POSITIVE, "resolved after memory is flat again this long"),
    # memory_growth
    "growth_rate_gib_per_h": Threshold(POSITIVE, "memory_growth: a steady climb at least this fast (GiB/h)"),
    "growth_rate_tolerance": Threshold(Range(0.0, 1.0, high_open=True), "the slope may fall this share short"),
    "growth_window_s": Threshold(POSITIVE, "the climb is fitted over this many seconds"),
    "growth_bucket_s": Threshold(POSITIVE, "in buckets of this many seconds"),
    "growth_min_r2": Threshold(UNIT, "the fit must explain at least this share of the variance (R^2)"),
    "growth_max_step_share": Threshold(SHARE, "a rise this share of which is one jump is a step, not a leak"),
    "growth_resolve_gib_per_h": Threshold(NON_NEGATIVE, "resolved once the climb is below this (GiB/h)"),
    "growth_reset_jump_gib": Threshold(POSITIVE, "a jump above this (GiB) between buckets restarts the fit"),
    # memory_pressure
    "pressure_frac": Threshold(SHARE, "memory_pressure: used memory at this share of the total ..."),
    "pressure_resolve_frac": Threshold(SHARE, "resolved below this share"),
    "pressure_sustain_s": Threshold(NON_NEGATIVE, "... for this many seconds"),
    # throughput_drop
    "throughput_drop_frac": Threshold(FRACTION, "throughput_drop: the rate this share below the baseline ..."),
    "throughput_sustain_s": Threshold(NON_NEGATIVE, "... for this long (checkpoints, evals are shorter)"),
    "throughput_smooth_s": Threshold(POSITIVE, "rolling median over this many seconds"),
    "throughput_recover_frac": Threshold(SHARE, "recovered above this share of the baseline ..."),
    "throughput_recover_s": Threshold(NON_NEGATIVE, "... for this many seconds"),
    "throughput_warmup_events": Threshold(Range(0.0, integer=True), "the first reports after a start ..."),
    "throughput_warmup_s": Threshold(NON_NEGATIVE, "... and the first seconds are warm-up"),
    "throughput_learn_s": Threshold(POSITIVE, "without a baseline file: the median of this long after warm-up"),
    "throughput_restart_gap_s": Threshold(POSITIVE, "a silence this long (or a step back) is a relaunch ..."),
    "throughput_restart_gap_intervals": Threshold(Range(1.0), "... and this many report intervals"),
    "throughput_rise_frac": Threshold(POSITIVE, "a learned baseline rises to a phase this share faster"),
    "clock_jitter_s": Threshold(NON_NEGATIVE, "time going back less than this is ranks interleaving"),
    "duplicate_step_s": Threshold(NON_NEGATIVE, "the same step again within this long is another rank's copy"),
    # stall
    "stall_min_s": Threshold(POSITIVE, "stall: no progress for at least this many seconds ..."),
    "stall_factor": Threshold(Range(1.0, low_open=True), "... and this many times the usual step interval"),
    "stall_first_s": Threshold(POSITIVE, "before the run showed one interval, the silence limit is this"),
    # crash / fx_tracing
    "crash_dedupe_s": Threshold(NON_NEGATIVE, "the same crash again within this long is one alert"),
    "crash_hold_s": Threshold(NON_NEGATIVE, "a crash waits this long for the other ranks' copies"),
    "crash_survive_s": Threshold(NON_NEGATIVE, "a traceback followed this soon by two later steps was survived"),
    "crash_caught_window_s": Threshold(NON_NEGATIVE, "a traceback survived before gets this long for its progress"),
    "exit_crash_window_s": Threshold(POSITIVE, "a crash this long before the job's exit is its reason"),
    "crash_traceback_lines": Threshold(COUNT, "traceback lines kept as evidence"),
    "crash_frames": Threshold(COUNT, "stack frames named in the message"),
    # recompile
    "recompile_storm_count": Threshold(COUNT, "recompile: a storm is this many recompiles of one function ..."),
    "recompile_storm_window_s": Threshold(POSITIVE, "... within this many seconds"),
    "recompile_quiet_s": Threshold(POSITIVE, "resolved after this long without one"),
    # recompile, kind "rate" (recompiles per hour after warm-up)
    "recompile_rate_warmup_s": Threshold(NON_NEGATIVE, "recompile rate: the first seconds of a (re)start are warm-up"),
    "recompile_rate_window_s": Threshold(POSITIVE, "... counted over this many seconds"),
    "recompile_rate_per_hour": Threshold(POSITIVE, "... fires at this many per hour without a baseline"),
    "recompile_rate_factor": Threshold(Range(1.0), "... or this many times the good run's rate"),
    "recompile_rate_min_per_hour": Threshold(NON_NEGATIVE, "... and at least this many per hour"),
    "recompile_rate_min_count": Threshold(COUNT, "... on at least this many recompiles in the window"),
    "recompile_rate_resolve_frac": Threshold(FRACTION, "... resolved below this share of the threshold"),
    # padding
    "padding_window_s": Threshold(POSITIVE, "padding: efficiency over this many seconds of batches ..."),
    "padding_min_samples": Threshold(COUNT, "... and at least this many reports"),
    "padding_margin": Threshold(FRACTION, "fires this far (0..1, absolute) below the good run's efficiency"),
    "padding_floor": Threshold(FRACTION, "... or, without a baseline, below this efficiency"),
    "padding_hysteresis": Threshold(UNIT, "resolved this far above the firing line again"),
    # alloc_thrash
    "alloc_thrash_window_s": Threshold(POSITIVE, "alloc_thrash: CUDA allocator retries counted over this window"),
    "alloc_thrash_per_hour": Threshold(POSITIVE, "... fires at this many retries per hour (busiest rank)"),
    "alloc_thrash_min_retries": Threshold(COUNT, "... and at least this many in the window"),
    "alloc_thrash_baseline_factor": Threshold(Range(1.0), "... and above this many times the good run's rate"),
    # stall phases (issue 19)
    "stall_eval_allowance_s": Threshold(NON_NEGATIVE, "stall: an evaluation may add this much silence"),
    "stall_checkpoint_allowance_s": Threshold(NON_NEGATIVE, "stall: a checkpoint save may add this much silence"),
    # loss (issue 19)
    "loss_nan_resolve_reports": Threshold(COUNT, "loss nan: resolved after this many finite reports in a row"),
    "loss_spike_window": Threshold(COUNT, "loss spike: the robust level is taken over this many reports ..."),
    "loss_spike_min_reports": Threshold(COUNT, "... once there are at least this many"),
    "loss_spike_k": Threshold(POSITIVE, "... a spike is this many robust sigmas (MAD) above the median ..."),
    "loss_spike_min_rel": Threshold(POSITIVE, "... and at least this share above it ..."),
    "loss_spike_min_abs": Threshold(NON_NEGATIVE, "... and at least this much (absolute) above it"),
    "loss_spike_resolve_reports": Threshold(COUNT, "resolved after this many reports back under the level"),
    "loss_spike_early_factor": Threshold(Range(1.0, low_open=True),
                                         "before that many reports: a loss this many times the highest so far"),
    "loss_smooth_reports": Threshold(COUNT, "loss divergence: the loss is smoothed over this many reports ..."),
    "loss_divergence_margin": Threshold(POSITIVE, "... fires this share above its recent minimum ..."),
    "loss_divergence_window_s": Threshold(POSITIVE, "... the minimum of this many seconds ..."),
    "loss_divergence_s": Threshold(NON_NEGATIVE, "... sustained this many seconds ..."),
    "loss_divergence_min_reports": Threshold(COUNT, "... and this many reports"),
    "loss_overflow_window": Threshold(COUNT, "loss overflow: skipped steps counted over this many iterations ..."),
    "loss_overflow_frac": Threshold(SHARE, "... a storm at this share of them skipped"),
    "loss_overflow_scale_floor": Threshold(NON_NEGATIVE, "... or the fp16 loss scale fallen to this floor"),
    # straggler (issue 19)
    "straggler_window_s": Threshold(POSITIVE, "straggler: per-rank seconds are medians over this window"),
    "straggler_min_samples": Threshold(COUNT, "... of at least this many reports per rank"),
    "straggler_warmup_s": Threshold(NON_NEGATIVE, "... after each rank's first this-many seconds"),
    "straggler_slow_factor": Threshold(Range(1.0), "straggler slow: compute this many times the others' ..."),
    "straggler_slow_min_excess_s": Threshold(NON_NEGATIVE, "... and at least this many seconds more ..."),
    "straggler_slow_for_s": Threshold(NON_NEGATIVE, "... for this long"),
    "straggler_resolve_factor": Threshold(Range(1.0), "resolved once its ratio is back under this"),
    "straggler_hung_min_s": Threshold(POSITIVE, "straggler hung: no step for at least this long ..."),
    "straggler_hung_factor": Threshold(POSITIVE, "... and this many usual step intervals, the others waiting"),
    "straggler_phase_allowance_s": Threshold(NON_NEGATIVE, "an eval or a save may hold the others this long"),
    "straggler_gpus_per_node": Threshold(Range(0.0, integer=True), "> 0: a rank's GPU is rank % this (LOCAL_RANK = GPU)"),
    # gpu_health (issue 19)
    "gpu_xid_repeat_s": Threshold(POSITIVE, "gpu_health xid: the same code again within this long is one episode"),
    "gpu_ecc_quiet_s": Threshold(POSITIVE, "gpu_health ecc: resolved after no rise (and nothing pending) this long"),
    "gpu_throttle_window_s": Threshold(POSITIVE, "gpu_health thermal/power: judged over this window of samples ..."),
    "gpu_throttle_frac": Threshold(SHARE, "... the reason active in at least this share of them ..."),
    "gpu_clock_low_frac": Threshold(SHARE, "... and the median SM clock at most this share of its max"),
    "gpu_pcie_sustain_s": Threshold(POSITIVE, "gpu_health pcie: link below its max width/gen this long"),
    "gpu_pcie_busy_util": Threshold(UNIT, "... the generation judged only at this utilisation (idle GPUs downshift)"),
    "gpu_pcie_resolve_s": Threshold(NON_NEGATIVE, "resolved after this long at the full link"),
}

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
