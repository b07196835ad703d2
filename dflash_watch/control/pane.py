"""The tmux pane a job lives in, as ``list-panes`` describes it.

Read in one tmux call per look (a format with the fields needed), so a
status costs one fork whatever the state.
"""

from __future__ import annotations

from dataclasses import dataclass

from .state import int_or_none
from .tmux import Tmux, TmuxTargetMissing, escape_arg

_FORMAT = "#{pane_active}\t#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}"


@dataclass(frozen=True, slots=True)
class Pane:
    pane_id: str
    pid: int
    dead: bool
    dead_status: int | None
    dead_signal: int | None


def active_pane(tmux: Tmux, target: str) -> Pane | None:
    """The active pane of ``target`` (a window), None if the window is gone.

    Raises TmuxServerGone when there is no server at all: the caller says so.
    """
    try:
        out = tmux.run("list-panes", "-t", target, "-F", _FORMAT).stdout
    except TmuxTargetMissing:
        return None
    rows = [line.split("\t") for line in out.splitlines() if line.count("\t") == 5]
    rows.sort(key=lambda r: r[0] != "1")  # the active pane first
    if not rows:
        return None
    _, pane_id, pid, dead, status, sig = rows[0]
    return Pane(pane_id, int(pid), dead == "1", int_or_none(status), int_or_none(sig))


def chain(*commands: list[str]) -> list[str]:
    """Several tmux commands in ONE invocation (so nothing happens between
    them), each data argument escaped so tmux never splits it at a ``;``."""
    out: list[str] = []
    for i, command in enumerate(commands):
        if i:
            out.append(";")
        out.extend(escape_arg(a) for a in command)
    return out
