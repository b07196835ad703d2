"""What to run and where: the ``[run]`` table of the config, or flags.

A frozen value: a takeover or a changed command makes a new spec
(``dataclasses.replace``), so a Job never sees its spec change under it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .tmux import validate_name

_SAFE = re.compile(r"[A-Za-z0-9._-]+")
_READABLE_MAX = 40  # characters of each part kept readable in a file name


def _readable(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", part)[:_READABLE_MAX]


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
    # Environment variables the training must not inherit: the names behind
    # the alert sinks' ``url_env`` / ``routing_key_env`` (the watcher's secrets).
    secret_env: tuple[str, ...] = ()

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

    def _parts(self) -> list[str]:
        return [self.socket or "default", self.session] + ([self.window] if self.window else [])

    @property
    def key(self) -> str:
        """A file name that is one job's alone: a readable prefix and a hash of the exact names.

        Sanitising alone is lossy (训练1 and 实验1 both read ``__1``; ``a;b``,
        ``a'b`` and ``a_b`` are one), and two jobs sharing a state file see
        each other's pids; the hash keeps every (socket, session, window) apart.
        """
        exact = json.dumps(self._parts(), ensure_ascii=False).encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(exact).hexdigest()[:12]
        return "--".join([*map(_readable, self._parts()), digest])

    @property
    def legacy_key(self) -> str | None:
        """The file name of releases before the hash, for names it kept intact (else None)."""
        parts = self._parts()
        return "--".join(parts) if all(_SAFE.fullmatch(p) for p in parts) else None

    @property
    def state_path(self) -> Path:
        """The run's record. A record of the old name is read while no new one exists, so a
        job started before an upgrade is still seen (its wrapper writes there when it ends)."""
        path = self.fresh_state_path
        legacy = self.legacy_key
        if legacy and not path.exists():
            old = Path(self.state_dir) / f"{legacy}.state.json"
            if old.exists():
                return old
        return path

    @property
    def fresh_state_path(self) -> Path:
        """Where a run started now records itself."""
        return Path(self.state_dir) / f"{self.key}.state.json"

    @property
    def lock_path(self) -> Path:
        return Path(self.state_dir) / f"{self.key}.lock"

    @property
    def target(self) -> str:
        """tmux target of the job's window; ``=`` asks for exact name matches."""
        return f"={self.session}:" + (f"={self.window}" if self.window else "")
