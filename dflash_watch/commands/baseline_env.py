"""What ``baseline save`` and ``baseline diff`` read besides the logs: the
environment's fingerprint and the probe files.

The fingerprint comes from ``--env VENV`` when given, else from the
configured tmux job's training process while it runs; a job that is not
running (or no tmux) leaves it out, with a notice: a diff then compares
only the run's figures.
"""

from __future__ import annotations

import argparse
import glob
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from .common import SettingsError

PROBE_DEFAULT = "dflash-probe-*.jsonl"


def environment_fingerprint(env: str | None, config: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the fingerprint as JSON, the venv's path) from ``--env`` or the job."""
    from ..fingerprint import FingerprintError, fingerprint_of_env, fingerprint_of_pid

    if env:
        try:
            fp = fingerprint_of_env(env, os.environ.get("TORCHINDUCTOR_CACHE_DIR"))
        except FingerprintError as exc:
            raise SettingsError(str(exc)) from None
        p = Path(env).expanduser()
        venv = p if p.is_dir() else p.parent.parent
        return fp.to_dict(), str(venv.resolve())
    pid = _job_pid(config)
    if pid is None:
        return None, None
    try:
        return fingerprint_of_pid(pid).to_dict(), None
    except FingerprintError as exc:
        sys.stderr.write(f"dflash-watch: no environment fingerprint: {exc}\n")
        return None, None


def _job_pid(config: Any) -> int | None:
    """The training process of the configured tmux job, None when it is not running."""
    try:
        from ..control.cli_actions import spec_from_run
        from ..control.job import Job
        from ..fingerprint import training_pid

        job = Job(spec_from_run(config.run))
        if not job.available:
            return None
        state = job.status()
    except Exception:  # no tmux, no session, a bad [run] table: no job to read
        return None
    if not state.running:
        return None
    return training_pid(state.pids)


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
