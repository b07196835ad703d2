"""One alert in full: the message, the numbers behind it, the traceback.

Numbers are shown in the units an engineer reads (GiB, tokens/s, clock
times in the run's zone); the traceback is log text and goes through the
same escaping as the log view.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from dflash_watch.detectors.base import Alert

from ..text import SEVERITY_STYLE, fmt_clock, plain
from ..values import format_value
from ..widgets.log_view import NORMAL, STYLES, classify

_LONG_KEYS = ("traceback", "message", "remedy", "stacks")


def evidence_text(alert: Alert, tz: Any) -> list[Any]:
    """The renderables of the evidence view, in reading order."""
    head = Text()
    head.append(f"{alert.severity.upper()} ", style=SEVERITY_STYLE.get(alert.severity, "bold"))
    head.append(f"{alert.detector}", style="bold")
    if alert.kind:
        head.append(f"/{plain(alert.kind)}")
    if alert.gpu is not None:
        head.append(f"  GPU {alert.gpu}")
    head.append(f"  {alert.state}  {fmt_clock(alert.time, tz)}  ", style="dim")
    head.append(plain(alert.source), style="underline")
    lines = plain(alert.message).split("\n")
    parts: list[Any] = [head, Text(""), Text(lines[0], style="bold")]
    if len(lines) > 1:
        parts.append(Text("\n".join(lines[1:])))
    ev = alert.evidence or {}
    remedy = ev.get("remedy")
    if remedy and str(remedy) not in alert.message:
        parts += [Text(""), Text.assemble(("what to do: ", "bold green"), plain(str(remedy)))]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    rows = 0
    for key, value in ev.items():
        if key in _LONG_KEYS or key == "frames":
            continue
        table.add_row(Text(plain(str(key))), Text(format_value(key, value, tz)))
        rows += 1
    if rows:
        parts += [Text(""), Text("numbers", style="bold underline"), table]
    frames = ev.get("frames")
    if frames:
        parts += [Text(""), Text("innermost frames", style="bold underline")]
        parts += [Text(plain(str(f)), style="red") for f in frames]
    if ev.get("message") and ev.get("message") != alert.message:
        parts += [Text(""), Text("error message", style="bold underline"), Text(plain(str(ev["message"])))]
    stacks = ev.get("stacks")
    if isinstance(stacks, list) and stacks:
        parts += [Text(""), Text("where the job's processes are (py-spy)", style="bold underline")]
        parts += stack_lines(stacks)
    tb = ev.get("traceback")
    if tb:
        parts += [Text(""), Text("traceback", style="bold underline")]
        prev = NORMAL
        for line in str(tb).splitlines():
            prev = classify(line, prev)
            parts.append(Text(plain(line), style=STYLES[prev], no_wrap=True, overflow="ellipsis"))
    return parts


def stack_lines(stacks: list[Any]) -> list[Text]:
    """A stall's captured stacks (``stacks.py``): each process, then its
    innermost frames. Frames and commands are the job's text: plain."""
    out: list[Text] = []
    for entry in stacks:
        if not isinstance(entry, dict):
            continue
        head = f"pid {entry.get('pid')}"
        if entry.get("command"):
            head += f"  {entry['command']}"
        if entry.get("thread"):
            head += f"  (thread {entry['thread']})"
        out.append(Text(plain(head), style="bold"))
        if entry.get("error"):
            out.append(Text(plain(f"  {entry['error']}"), style="yellow"))
        for frame in entry.get("frames") or ():
            out.append(Text(plain(f"  {frame}"), style="red", no_wrap=True, overflow="ellipsis"))
    return out


class EvidenceScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    EvidenceScreen { align: center middle; }
    EvidenceScreen > VerticalScroll {
        width: 95%; height: 90%; border: round $accent; background: $surface; padding: 0 1;
    }
    EvidenceScreen Static { height: auto; }
    """
    BINDINGS = [Binding("escape,q,enter", "dismiss_screen", "close", show=True, id="evidence_close")]

    def __init__(self, alert: Alert, tz: Any = None, jumped: str | None = None) -> None:
        super().__init__()
        self.alert = alert
        self.tz = tz
        self.jumped = jumped

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "alert evidence (Esc: close)"
            if self.jumped:
                # Text, not a str: a border title's str is read as markup, and
                # a log named ``exp[lr=1e-4].log`` would end the dashboard.
                scroll.border_subtitle = Text(plain(self.jumped))
            for part in evidence_text(self.alert, self.tz):
                yield Static(part)

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)
