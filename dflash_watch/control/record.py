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
# Beside the record: the watcher asked this run to end (abort, relaunch).
# The wrapper copies it into the record as ``"asked"``; the exit then reads
# as ``aborted`` (CONTRACTS section 4), not as a kill from outside.
ASKED_SUFFIX = ".asked"


def launch_argv(state_path: Path, run_id: str, command: str, unset: tuple[str, ...] = ()) -> list[str]:
    """The argv tmux runs in the pane. ``--shell=`` keeps a command starting with '-' a value;
    ``--unset NAME``: a variable the training must not inherit (a secret of the watcher)."""
    drop = [f"--unset={name}" for name in unset]
    return [sys.executable, "-I", WRAPPER_PATH, "--state", str(state_path), "--run-id", run_id, *drop,
            f"--shell={command}"]


def asked_path(state_path: Path) -> Path:
    return Path(f"{state_path}{ASKED_SUFFIX}")


def write_asked(state_path: Path, run_id: str | None, action: str, now: float) -> None:
    """Say, before the first signal, that the end of run ``run_id`` was asked for (atomic)."""
    if not run_id:
        return
    path = asked_path(state_path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps({"run_id": run_id, "action": action, "time": now}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # the stop still happens; it would read as a kill


def read_asked(state_path: Path, run_id: str | None) -> str | None:
    """The action asked for run ``run_id``, from the record's side file; None when none was."""
    rec = read_record(asked_path(state_path))
    if rec is None or not run_id or rec.get("run_id") != run_id:
        return None
    return str(rec.get("action") or "abort")


def read_record(path: Path) -> dict | None:
    """The wrapper's record, None when there is none (or half of one: writes are atomic)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_ours(rec: dict | None, pane_pid: int | None) -> bool:
    """The pane runs the wrapper that wrote ``rec`` (not a shell or program the user started)."""
    return rec is not None and pane_pid is not None and rec.get("wrapper_pid") == pane_pid


def outcome_text(rec: dict) -> str:
    from .state import int_or_none, signame

    if rec.get("asked"):
        how = signame(int_or_none(rec.get("signal"))) if rec.get("signal") else f"exit code {rec.get('code')}"
        return f"stopped as asked ({rec['asked']}) after {how}"
    if rec.get("signal"):
        return f"killed by {signame(int_or_none(rec.get('signal')))}"
    return f"exited with code {rec.get('code')}"
