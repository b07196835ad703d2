"""What several commands share: config, baseline, time zone, thresholds."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..baseline.store import Baseline, BaselineError, load_baseline
from ..config import Config, ConfigError, load_config, with_overrides


class SettingsError(ValueError):
    """A flag value that cannot be used."""


ClearError = (ConfigError, BaselineError, SettingsError)


@dataclass(frozen=True, slots=True)
class RunSettings:
    config: Config
    detector_config: Any
    baseline: Baseline | None
    tz: Any
    progress_pattern: Any
    # ``--probe`` files and globs as given; empty: look beside the logs
    # (``probe_patterns``).
    probes: tuple[str, ...] = ()


def parse_tz(name: str | None) -> Any:
    if not name:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SettingsError(f"--tz {name!r}: unknown time zone (try UTC or Europe/Berlin)") from None


def detector_config_from(overrides: dict[str, Any], tz: str | None = None) -> Any:
    """A DetectorConfig from ``[detectors]`` overrides (checked against the
    ranges declared in dflash_watch.config) and the run's time zone, so that
    clock times in alert messages are in the zone the user asked for."""
    from dflash_watch.detectors.config import DetectorConfig

    from ..config import check_detectors

    return DetectorConfig(**check_detectors(overrides), tz=tz)


def progress_pattern_from(regex: str | None) -> Any:
    if not regex:
        return None
    from dflash_watch.parsers.progress import ProgressPattern

    try:
        return ProgressPattern(regex)
    except Exception as exc:  # re.error or a missing named group
        raise ConfigError(f"progress_regex: {exc}") from None


def load_run_settings(args: argparse.Namespace) -> RunSettings:
    config = load_config(getattr(args, "config", None))
    config = with_overrides(
        config,
        logs=getattr(args, "log", None) or getattr(args, "logs", None),
        tz=getattr(args, "tz", None),
        baseline_file=getattr(args, "baseline", None),
        samples_file=getattr(args, "gpu_samples", None) if isinstance(getattr(args, "gpu_samples", None), str) else None,
        record_file=getattr(args, "record_gpu", None),
        command=getattr(args, "cmd", None),
        session=getattr(args, "session", None),
        socket=getattr(args, "socket", None),
        cwd=getattr(args, "cwd", None),
        grace_s=getattr(args, "grace", None),
        no_gpu=getattr(args, "no_gpu", False),
    )
    baseline = load_baseline(config.baseline_file) if config.baseline_file else None
    tz = parse_tz(config.tz)
    return RunSettings(
        config=config,
        detector_config=detector_config_from(config.detectors, config.tz if tz is not None else None),
        baseline=baseline,
        tz=tz,
        progress_pattern=progress_pattern_from(config.progress_regex),
        probes=tuple(getattr(args, "probe", None) or ()),
    )


def probe_patterns(settings: RunSettings, logs: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """Where probe lines are: ``--probe`` files and globs, else
    ``dflash-probe-*.jsonl`` beside each log and in the job's working
    directory (``[run] cwd``). Globs stay globs: live, a rank's file that
    appears later is found; ``probe_files`` expands them for one read."""
    from ..sources.probes import discover

    config = settings.config
    return discover(settings.probes, config.logs if logs is None else logs, config.run.cwd)


def probe_files(settings: RunSettings, logs: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """``probe_patterns`` as the files they name now. A ``--probe`` name
    without a wildcard is kept (a missing file is the reader's error to
    report); the default places may hold nothing, and that is fine."""
    config = settings.config
    return find_probe_files(settings.probes, config.logs if logs is None else logs, config.run.cwd)


def find_probe_files(named: Sequence[str], logs: Sequence[str], cwd: str | None = None, *,
                     must_match: bool = False) -> list[str]:
    """The one probe-file discovery (``discover`` then ``expand``) for every
    command: ``--probe`` files and globs, else ``dflash-probe-*.jsonl``
    beside the logs (and in ``cwd``, the job's working directory, when given).

    ``must_match``: a ``--probe`` glob that names no file is a usage error
    (``baseline save``/``diff`` profile exactly what they were given)."""
    import glob
    import os

    from ..sources.probes import discover, expand
    from ..sources.wakeups import is_glob

    if must_match:
        for pattern in named:
            path = os.path.expanduser(pattern)
            if is_glob(path) and not glob.glob(path):
                raise SettingsError(f"--probe {pattern!r} matches no file")
    return expand(discover(named, logs, cwd))


def monitor_kwargs(settings: RunSettings) -> dict[str, Any]:
    """What every command's Monitor takes from the settings (one place)."""
    run = settings.config.run
    return {
        "detector_config": settings.detector_config,
        "baseline": settings.baseline,
        "tz": settings.tz,
        "progress_pattern": settings.progress_pattern,
        "tokens_per_step": run.tokens_per_step,
        "tokens_per_sample": run.tokens_per_sample,
    }


def expand_logs(patterns: tuple[str, ...] | list[str]) -> list[str]:
    """Log names and globs (`logs/rank*.log`) as the files they name now, in
    order, each once; a name without a wildcard is kept as it is (a missing
    file is the reader's error to report)."""
    import glob
    import os

    from ..sources.wakeups import is_glob

    paths: list[str] = []
    for pattern in patterns:
        pattern = os.path.expanduser(pattern)
        matches = sorted(glob.glob(pattern)) if is_glob(pattern) else [pattern]
        paths.extend(p for p in matches if p not in paths)
    return paths


def wants_job(args: argparse.Namespace, config: Config) -> bool:
    """Job control when the user named a job: a command, or a session of their own.

    Here, not in live_setup: ``state_dir_problem`` asks it too, and
    live_setup imports this module (one home, no import circle)."""
    from ..control.cli_actions import DEFAULT_SESSION

    run = config.run
    return bool(getattr(args, "cmd", None) or getattr(args, "session", None) or run.command
                or run.session != DEFAULT_SESSION)


def state_dir_problem(args: argparse.Namespace) -> str | None:
    """Why the state dir (``[run] state_dir``, else ``$XDG_STATE_HOME/dflash-watch``)
    cannot hold the job's files, as one line; None when it can.

    Asked up front, before tmux or a thread is started: a state dir that is
    a file, or on a read-only mount, otherwise surfaces as an OSError
    traceback from deep inside job control (or, live, not at all). A dir
    that does not exist yet is fine when it can be made: its nearest
    existing ancestor is tried with a temporary file that is removed at
    once, so a command that only reads (``status``) leaves nothing behind.
    """
    import os
    import tempfile
    from pathlib import Path

    from ..control.spec import default_state_dir

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError:
        return None  # the command reports the config itself, in its words
    if getattr(args, "command", None) in ("watch", "headless"):
        if not wants_job(args, config):
            return None  # no job to control: watching alone keeps no state
    configured = config.run.state_dir
    where = ("[run] state_dir" if configured else
             "$XDG_STATE_HOME/dflash-watch" if os.environ.get("XDG_STATE_HOME") else "the default")
    path = Path(str(configured)).expanduser() if configured else default_state_dir()
    fix = f"set {'[run] state_dir' if configured else 'XDG_STATE_HOME (or [run] state_dir)'} to a writable directory"
    probe = path
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return f"state dir {path} ({where}): {probe} is not a directory; {fix}"
    try:
        with tempfile.TemporaryFile(dir=probe, prefix=".dflash-watch-probe-"):
            pass
    except OSError as exc:
        return f"state dir {path} ({where}): cannot write in {probe}: {exc.strerror or exc}; {fix}"
    return None
