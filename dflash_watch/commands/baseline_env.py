"""What ``baseline save`` and ``baseline diff`` read besides the logs, from
their arguments and the config: the replay settings and the probe files.

Argument handling only; which environment is fingerprinted (``--env`` or
the job's process) is ``dflash_watch.baseline.environment``.
"""

from __future__ import annotations

import argparse
import glob
import inspect
import os
import sys
from typing import Any

from .common import SettingsError

PROBE_DEFAULT = "dflash-probe-*.jsonl"


def replay_settings(args: Any) -> tuple[Any, Any, Any, Any]:
    """(config, tz, detector config, progress pattern) for `baseline save`
    and `baseline diff`: both replay logs the way the config says."""
    from ..config import load_config
    from .common import detector_config_from, parse_tz, progress_pattern_from

    config = load_config(args.config)
    tz_name = args.tz or config.tz
    tz = parse_tz(tz_name)
    detector_config = detector_config_from(config.detectors, tz_name if tz is not None else None)
    return config, tz, detector_config, progress_pattern_from(config.progress_regex)


def probe_files(args: argparse.Namespace, logs: list[str]) -> list[str]:
    """``--probe`` files and globs, else ``dflash-probe-*.jsonl`` beside the logs."""
    named = list(getattr(args, "probe", None) or [])
    out: list[str] = []
    if named:
        for pattern in named:
            path = os.path.expanduser(pattern)
            if glob.has_magic(path):
                matches = sorted(glob.glob(path))
                if not matches:
                    raise SettingsError(f"--probe {pattern!r} matches no file")
                out.extend(matches)
            else:
                out.append(path)
    else:
        for directory in sorted({os.path.dirname(os.path.abspath(p)) for p in logs}):
            out.extend(sorted(glob.glob(os.path.join(glob.escape(directory), PROBE_DEFAULT))))
    return list(dict.fromkeys(out))


def replay_probe_kwargs(probes: list[str]) -> dict[str, Any]:
    """``probes=`` for ``replay`` where it takes probe files (another part
    of issue 11 adds it); nothing, with a notice, where it does not yet."""
    if not probes:
        return {}
    from ..replay import replay

    if "probes" in inspect.signature(replay).parameters:
        return {"probes": probes}
    sys.stderr.write("dflash-watch: probe files are not read by this version's replay; left out\n")
    return {}
