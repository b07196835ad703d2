"""The banner over a stopped job: which one, and what it says.

A crash or a kill from outside stops a run against its will: a red banner,
the crash's first line, `r` to relaunch and Enter for the evidence. A stop
the user asked for (`a`, `abort`, a relaunch: ``process_exit`` kind
``aborted``, CONTRACTS section 4) is no failure: a calm banner that says
so, never "killed by SIGINT" in red. A job that ended cleanly gets none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from dflash_watch.detectors.base import Alert

from .text import asked_to_stop, plain, signal_label

CRASH_DETECTORS = ("crash", "fx_tracing")


@dataclass(frozen=True, slots=True)
class Banner:
    text: Text
    calm: bool  # a stop the user asked for: not red, and focus stays where it is


def choose_banner(state: Any, last_exit: Any, firing: list[Alert], *, controlled: bool,
                  control_note: str | None) -> Banner | None:
    """The banner for the job's state, or None (running, or ended cleanly).

    ``controlled``: the dashboard can relaunch the job (`r`); else
    ``control_note`` says how the user restarts it themselves.
    """
    dead = state is not None and getattr(state, "state", "") in ("exited", "killed")
    crashed = dead and not (state.state == "exited" and state.code == 0)
    crash = next((a for a in firing if a.detector in CRASH_DETECTORS), None)
    if (dead or state is None) and asked_to_stop(state, last_exit, crash):
        return Banner(_calm(state, last_exit, controlled), calm=True)
    if not crashed and not (crash is not None and (state is None or dead)) and not (
        last_exit is not None and last_exit.kind not in ("clean", "aborted") and state is None
    ):
        return None
    first = Text(no_wrap=True, overflow="ellipsis", end="")
    first.append(" ✖ ", style="bold white on red")
    what = state.line() if state is not None and hasattr(state, "line") else "the job stopped"
    first.append(f" {plain(what)}", style="bold")
    if crash is not None:
        first.append(": " + plain(crash.message.splitlines()[0][:300]))
    second = Text(no_wrap=True, overflow="ellipsis", end="")
    if controlled:
        second.append(" r ", style="bold black on yellow")
        second.append(" relaunch (preflight first)   ", style="bold")
    elif control_note:
        second.append(f" restart it yourself: {plain(control_note)}   ", style="yellow")
    second.append(" ↑↓ Enter ", style="bold black on cyan")
    second.append(" the highlighted alert: its evidence and log line")
    return Banner(Text("\n", no_wrap=True, overflow="ellipsis").join([first, second]), calm=False)


def _calm(state: Any, last_exit: Any, controlled: bool) -> Text:
    first = Text(no_wrap=True, overflow="ellipsis", end="")
    first.append(" ■ ", style="bold black on cyan")
    asked = getattr(state, "asked", None) or getattr(last_exit, "asked", None) or "abort"
    first.append(f" stopped as asked ({plain(str(asked))})", style="bold")
    signum = getattr(state, "signal", None) if state is not None else getattr(last_exit, "signal", None)
    how = signal_label(signum)
    if how:
        first.append(f" with {how}", style="dim")
    if state is not None:
        first.append(f" in {plain(state.session)}", style="dim")
    if not controlled:
        return first
    second = Text(no_wrap=True, overflow="ellipsis", end="")
    second.append(" s ", style="bold black on cyan")
    second.append(" start it again   ")
    second.append(" r ", style="bold black on cyan")
    second.append(" relaunch (preflight first)")
    return Text("\n", no_wrap=True, overflow="ellipsis").join([first, second])
