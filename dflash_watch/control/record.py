"""The wrapper protocol: how a managed run is launched and how its record is read.

The pane runs ``wrapper.py`` (see there) with the state file of the job's
spec; the wrapper writes one JSON record per run incarnation (run id,
wrapper pid, the training's pid and process group, start and end, exit code
or signal, the first failing pipeline stage). Everything that reads or
makes that record lives here, so the two sides cannot drift apart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WRAPPER_PATH = str(Path(__file__).resolve().with_name("wrapper.py"))


def launch_argv(state_path: Path, run_id: str, command: str) -> list[str]:
    """The argv tmux runs in the pane. ``--shell=`` keeps a command starting with '-' a value."""
    return [sys.executable, "-I", WRAPPER_PATH, "--state", str(state_path), "--run-id", run_id,
            f"--shell={command}"]


def read_record(path: Path) -> dict | None:
    """The wrapper's record, None when there is none (or half of one: writes are atomic)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_ours(rec: dict | None, pane_pid: int | None) -> bool:
    """The pane runs the wrapper that wrote ``rec`` (not a shell or program the user started)."""
    return bool(rec) and pane_pid is not None and rec.get("wrapper_pid") == pane_pid


def outcome_text(rec: dict) -> str:
    from .state import int_or_none, signame

    if rec.get("signal"):
        return f"killed by {signame(int_or_none(rec.get('signal')))}"
    return f"exited with code {rec.get('code')}"
