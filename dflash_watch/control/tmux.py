"""A thin, safe wrapper around the tmux client.

Why a wrapper at all: every tmux call must be a list argv (never a shell
string), must carry the same ``-L``/``-S`` socket choice, must time out
instead of hanging the dashboard, and its failures must be told apart
(tmux not installed, server gone, target missing) so that callers can
degrade instead of crash.

tmux's own argv parser treats an argument ending in ``;`` as a command
separator (that is how ``new-session ... ; set-option ...`` chains in one
invocation). Data arguments (the user's command, a directory) are therefore
escaped with :func:`escape_arg` so a command like ``make;`` is never split.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Characters that tmux gives a meaning in a target (session:window.pane,
# $id, @id, %id, !, ^, = exact match) or in a format (#). A name holding one
# of them would make a later ``-t NAME`` hit something else. A backslash is
# doubled by tmux when it names a session or window (tmux 3.3: ``a\`` lists
# as ``a\\``), so the name would never be found again.
_FORBIDDEN_NAME_CHARS = set(":.$%@!^#=\\")

# stderr fragments that mean "no server", as printed by tmux 2.x-3.5.
_SERVER_GONE_MARKERS = (
    "no server running",
    "error connecting to",
    "server exited unexpectedly",
    "lost server",
)
_NOT_FOUND_MARKERS = ("can't find session", "can't find window", "can't find pane", "session not found")


class TmuxError(RuntimeError):
    """A tmux command failed; ``stderr`` holds tmux's own words."""

    def __init__(self, message: str, stderr: str = "", argv: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.argv = tuple(argv)


class TmuxMissing(TmuxError):
    """No usable tmux binary: job control is off, monitoring still works."""


class TmuxServerGone(TmuxError):
    """The tmux server is not running (never started, or killed mid-run)."""


class TmuxTargetMissing(TmuxError):
    """The session, window or pane named by ``-t`` does not exist."""


class TmuxTimeout(TmuxError):
    """tmux did not answer in time (a wedged server must not wedge us)."""


class InvalidName(ValueError):
    """A session or window name that tmux would read as target syntax."""


def validate_name(name: str, what: str = "session") -> str:
    """Return ``name`` or raise :class:`InvalidName` with a one-line reason."""
    if not isinstance(name, str) or not name:
        raise InvalidName(f"{what} name must not be empty")
    if name.startswith("-"):
        raise InvalidName(f"{what} name {name!r} must not start with '-' (tmux would read it as an option)")
    for ch in name:
        if ch.isspace() or not ch.isprintable():
            raise InvalidName(f"{what} name {name!r} must not contain whitespace or control characters")
        if ch in _FORBIDDEN_NAME_CHARS:
            raise InvalidName(
                f"{what} name {name!r} must not contain {ch!r} "
                f"(tmux target syntax: {''.join(sorted(_FORBIDDEN_NAME_CHARS))})"
            )
    return name


def escape_arg(arg: str) -> str:
    """Protect a data argument from tmux's ``;`` command separator.

    tmux turns a trailing ``\\;`` into ``;`` and treats a bare trailing ``;``
    as a separator, so inserting one backslash before a trailing ``;``
    round-trips every string exactly (``x\\;`` stays ``x\\;``).
    """
    if arg.endswith(";"):
        return arg[:-1] + "\\;"
    return arg


def escape_format(text: str) -> str:
    """Protect text from tmux format expansion (``-c`` directories are expanded)."""
    return text.replace("#", "##")


@dataclass(frozen=True, slots=True)
class Tmux:
    """One tmux server, chosen by socket name (``-L``) or path (``-S``).

    ``socket`` containing a ``/`` is a path, anything else a name; None is
    the user's default server.
    """

    socket: str | None = None
    timeout_s: float = 10.0
    binary: str | None = None
    env: dict[str, str] | None = field(default=None, compare=False)

    def resolve_binary(self) -> str:
        path = self.binary or shutil.which("tmux", path=(self.env or os.environ).get("PATH"))
        if not path:
            raise TmuxMissing("tmux not found on PATH: job control disabled (monitoring still works)")
        return path

    @property
    def available(self) -> bool:
        try:
            self.resolve_binary()
        except TmuxMissing:
            return False
        return True

    def argv(self, *args: str) -> list[str]:
        # -u: names are UTF-8 whatever the locale. Under LANG=C tmux turns
        # each byte of 训练1 into '_', and 训练1 and 实验1 become one session.
        argv = [self.resolve_binary(), "-u"]
        if self.socket:
            argv += ["-S", self.socket] if "/" in self.socket else ["-L", self.socket]
        argv.extend(args)
        return argv

    def run(self, *args: str, check: bool = True, timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run one tmux invocation; raise a typed :class:`TmuxError` on failure."""
        argv = self.argv(*args)
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s or self.timeout_s,
                env=self.env,
                check=False,
            )
        except FileNotFoundError as exc:  # binary vanished between which() and exec
            raise TmuxMissing(f"tmux not runnable: {exc}", argv=argv) from exc
        except subprocess.TimeoutExpired as exc:
            raise TmuxTimeout(f"tmux did not answer within {timeout_s or self.timeout_s:g} s", argv=argv) from exc
        if check and proc.returncode != 0:
            raise classify_error(proc.stderr, argv)
        return proc

    def server_running(self) -> bool:
        try:
            self.run("list-sessions", "-F", "#{session_name}")
        except (TmuxServerGone, TmuxTargetMissing):
            return False
        return True

    def has_session(self, name: str) -> bool:
        try:
            self.run("has-session", "-t", f"={name}")
        except (TmuxServerGone, TmuxTargetMissing):
            return False
        return True

    def kill_server(self) -> None:
        """End this server (one of our own: the demo's, a test's) and remove
        the socket file tmux leaves behind it: every demo would otherwise
        leave one more in ``/tmp/tmux-UID``. The user's default server
        (``socket`` None) keeps its file."""
        try:
            self.run("kill-server")
        except (TmuxServerGone, TmuxTargetMissing):
            pass
        if self.socket:
            path = Path(self.socket) if "/" in self.socket else self._socket_folder() / self.socket
            path.unlink(missing_ok=True)

    def _socket_folder(self) -> Path:
        """Where tmux puts a named (``-L``) server's socket."""
        env = self.env or os.environ
        return Path(env.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"


def classify_error(stderr: str, argv: Sequence[str]) -> TmuxError:
    text = (stderr or "").strip()
    low = text.lower()
    first = text.splitlines()[0] if text else "tmux failed"
    if any(m in low for m in _SERVER_GONE_MARKERS):
        return TmuxServerGone(f"tmux server not running ({first})", text, argv)
    if any(m in low for m in _NOT_FOUND_MARKERS):
        return TmuxTargetMissing(first, text, argv)
    return TmuxError(first, text, argv)
