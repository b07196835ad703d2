"""The confirmation of a takeover: `r` on a run the user started by hand in the pane.

Taking over respawns the user's pane (ending the shell at its prompt) with
a command dflash-watch read or guessed: the question shows all of it (the
pane, the command and where it came from, the directory, what will be
stopped, the GPUs), and says how to give the command instead when it is
only a guess.
"""

from __future__ import annotations

import textwrap
from typing import Any

from rich.text import Text

from .text import plain

LABEL = 10
WRAP = 74  # the confirmation's text width (90 columns, border and padding) less the label column


def _row(out: Text, label: str, value: str, style: str = "", label_style: str = "bold") -> None:
    """One "label  value" row, wrapped at spaces under the value column (a command stays readable)."""
    lines = textwrap.wrap(plain(value), WRAP, break_on_hyphens=False, break_long_words=False) or [""]
    out.append(f"{label:<{LABEL}}", style=label_style)
    out.append(("\n" + " " * LABEL).join(lines) + "\n", style=style)


def takeover_title(adoption: Any) -> str:
    return f"Take over pane {adoption.pane} of {adoption.session} and run it again as a managed job?"


def takeover_text(adoption: Any, facts: Any = None) -> Text:
    out = Text()
    for label, value in adoption.lines():
        style = ""
        if label == "from" and not adoption.certain:
            style = "yellow"
        elif label == "will stop":
            style = "bold red"
        elif label == "command":
            style = "bold"
        _row(out, label, value, style)
    if facts is not None:
        _row(out, "GPUs", ", ".join(map(str, facts.job_gpus)) if facts.job_gpus else "unknown (no samples)")
        for h in facts.foreign[:6]:
            fate = ("the takeover waits for it to exit, then refuses" if facts.gpus_configured
                    else "not the job's; it keeps its memory across the takeover")
            _row(out, "others", f"pid {h.pid} {h.name or '?'} on GPU {h.gpu}: {fate}", "yellow", "bold yellow")
    out.rstrip()
    return out
