"""What to run and where: the ``[run]`` table of the config, or flags.

A frozen value: a takeover or a changed command makes a new spec
(``dataclasses.replace``), so a Job never sees its spec change under it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .tmux import validate_name


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "dflash-watch"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What to run and where (the ``[run]`` table of the config, or flags).

    ``gpus``: the job's GPU indices; when set, any process holding memory on
    them blocks a relaunch, whoever owns it. ``preflight_timeout_s``: how long
    relaunch waits for the old run to let go before refusing.
    """

    command: str  # may be empty for status/abort; start/relaunch need it
    session: str
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    socket: str | None = None
    window: str | None = None
    grace_s: float = 30.0
    state_dir: Path = field(default_factory=default_state_dir)
    gpus: tuple[int, ...] | None = None
    preflight_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        validate_name(self.session, "session")
        if self.window is not None:
            validate_name(self.window, "window")
        if not isinstance(self.command, str):
            raise ValueError("run command must be a string")
        for key in self.env:
            if not key or "=" in key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"invalid environment variable name {key!r}")
        if self.grace_s < 0:
            raise ValueError("grace period must be >= 0 seconds")

    @property
    def key(self) -> str:
        """A file-name-safe identity of (socket, session, window)."""
        sock = re.sub(r"[^A-Za-z0-9_.-]", "_", self.socket or "default")
        parts = [sock, self.session] + ([self.window] if self.window else [])
        return "--".join(re.sub(r"[^A-Za-z0-9_.+-]", "_", p) for p in parts)

    @property
    def state_path(self) -> Path:
        return Path(self.state_dir) / f"{self.key}.state.json"

    @property
    def lock_path(self) -> Path:
        return Path(self.state_dir) / f"{self.key}.lock"

    @property
    def target(self) -> str:
        """tmux target of the job's window; ``=`` asks for exact name matches."""
        return f"={self.session}:" + (f"={self.window}" if self.window else "")
