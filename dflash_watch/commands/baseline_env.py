"""What ``baseline save`` and ``baseline diff`` read besides the logs, from
their arguments and the config: the replay settings and how probe files
are handed to ``replay``. Which probe files: ``common.find_probe_files``
(with ``must_match``, and not in the job's working directory, whose probe
files are the current run's, not the saved one's).

Argument handling only; which environment is fingerprinted (``--env`` or
the job's process) is ``dflash_watch.baseline.environment``.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any


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
