"""Which environment ``baseline save`` and ``baseline diff`` fingerprint.

``--env VENV`` when given, else the configured tmux job's training process
while it runs; a job that is not running (or no tmux) leaves it out, with
a notice: a diff then compares only the run's figures. The reading itself
is ``fingerprint/``'s; this module only chooses what to read.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def environment_fingerprint(env: str | None, config: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the fingerprint as JSON, the venv's path) from ``--env`` or the job.

    A bad ``--env`` raises ``FingerprintError`` (the user named it: exit 2
    with its one line); a job whose process cannot be read is a notice and
    no fingerprint."""
    from .fingerprint import FingerprintError, fingerprint_of_env, fingerprint_of_pid

    if env:
        fp = fingerprint_of_env(env, os.environ.get("TORCHINDUCTOR_CACHE_DIR"))
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

        job = Job(spec_from_run(config.run))
        if not job.available:
            return None
    except Exception:  # no tmux, a bad [run] table: no job to read
        return None
    return running_training_pid(job)


def running_training_pid(job: Any) -> int | None:
    """The training process of ``job`` (a ``control.job.Job``) while it runs,
    else None: no job, tmux or the session gone, the job not running.

    The one way to the process whose environment is fingerprinted, for
    ``baseline save``/``diff`` (``_job_pid``) and for the live session
    (``diagnose.job_fingerprint``): its first Python interpreter
    (``fingerprint.training_pid``)."""
    from .fingerprint import training_pid

    if job is None:
        return None
    try:
        state = job.status()
    except Exception:  # noqa: BLE001 - tmux gone, no session: no process to read
        return None
    if not getattr(state, "running", False):
        return None
    return training_pid(getattr(state, "pids", ()) or ())
