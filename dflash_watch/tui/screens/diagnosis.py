"""The `d` screen: what changed since the good run, most likely cause first.

It shows the same ranked changes as `dflash-watch baseline diff` (CONTRACTS
section 7: ``what``, ``baseline``, ``now``, ``says`` and, where the ranking
knows one, ``next_step``), so what a person reads on screen is what a script
reads from ``--json``. Working out the changes (replaying nothing, but
reading the job's environment from /proc and its venv) happens off the UI
thread; this screen only draws the result.

Every string shown comes from logs, package metadata or the environment:
it goes through ``plain`` like log text, so no markup in it takes effect.
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

from ...diagnose import Diagnosis
from ...report import format_rate
from ..text import fmt_bytes, plain


def _value(value: Any, what: str = "") -> str:
    """A profile value as an engineer reads it: bytes in KB/MB/GB, rates in Ktok/s."""
    if value is None:
        return "missing"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        if what == "throughput":
            return format_rate(float(value))
        if what == "padding_efficiency":
            return f"{value:.0%}"
        return f"{value:.4g}" if isinstance(value, float) else str(value)
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            if k == "path":
                continue
            if k.endswith("bytes") and isinstance(v, (int, float)):
                parts.append(fmt_bytes(v))
            elif isinstance(v, float) and v.is_integer():
                parts.append(f"{int(v)} {k}")
            else:
                parts.append(f"{k}={v}")
        return ", ".join(parts)
    if isinstance(value, (list, tuple)):
        text = " ".join(str(v) for v in value)
        return text if len(text) <= 60 else text[:59] + "…"
    return str(value)


def diagnosis_text(diagnosis: Diagnosis) -> list[Any]:
    """The renderables of the screen, in reading order (tested without a terminal)."""
    parts: list[Any] = []
    head = Text()
    if diagnosis.symptoms:
        head.append("symptoms this session: ", style="bold")
        head.append(plain(", ".join(diagnosis.symptoms)), style="bold red")
        head.append("   ")
    head.append("baseline: ", style="bold")
    head.append(plain(diagnosis.baseline or "none"), style="dim")
    parts.append(head)
    if diagnosis.note:
        parts += [Text(""), Text(plain(diagnosis.note), style="yellow")]
    if not diagnosis.changes:
        if not diagnosis.note:
            parts += [Text(""), Text("nothing differs from the good run that dflash-watch can see", style="green")]
        return parts
    table = Table.grid(padding=(0, 1))
    table.add_column(justify="right", style="bold", no_wrap=True)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(no_wrap=True)
    for rank, change in enumerate(diagnosis.changes, 1):
        what = plain(str(change.get("what", "?")))
        if change.get("gpu") is not None:
            what += f" (GPU {change['gpu']})"
        was, now = _value(change.get("baseline"), what), _value(change.get("now"), what)
        table.add_row(Text(f"{rank}."), Text(what), Text(plain(f"{was} -> {now}"), style="dim"))
    parts += [Text(""), table]
    for rank, change in enumerate(diagnosis.changes, 1):
        says = change.get("says")
        block = Text()
        block.append(f"{rank}. ", style="bold")
        block.append(plain(str(says or change.get("what", ""))), style="bold" if rank == 1 else "")
        step = change.get("next_step")
        if step:
            block.append("\n   next: ", style="green")
            block.append(plain(str(step)))
        parts += [Text(""), block]
    return parts


class DiagnosisScreen(ModalScreen[None]):
    """A modal over the dashboard; Esc closes it, the run goes on underneath."""

    DEFAULT_CSS = """
    DiagnosisScreen { align: center middle; }
    DiagnosisScreen > VerticalScroll {
        width: 95%; height: 90%; border: round $accent; background: $surface; padding: 0 1;
    }
    DiagnosisScreen Static { height: auto; }
    """
    BINDINGS = [Binding("escape,q,d", "close", "close", show=True)]

    def __init__(self, diagnosis: Diagnosis, refresh: Any = None, refresh_s: float = 5.0) -> None:
        super().__init__()
        self.diagnosis = diagnosis
        # Asked every ``refresh_s`` while the screen is up: a run that is
        # degrading goes on changing under it (a new symptom, the crash).
        self._refresh = refresh
        self._refresh_s = refresh_s

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diagnosis-body") as scroll:
            scroll.border_title = "what changed since the good run, most likely cause first (Esc: close)"
            for part in diagnosis_text(self.diagnosis):
                yield Static(part)

    def on_mount(self) -> None:
        if self._refresh is not None:
            self.set_interval(self._refresh_s, self._refresh)

    def show(self, diagnosis: Diagnosis) -> None:
        """Draw a newer diagnosis in place (the scroll position is kept)."""
        if diagnosis == self.diagnosis:
            return
        self.diagnosis = diagnosis
        body = self.query_one("#diagnosis-body", VerticalScroll)
        body.remove_children()
        body.mount_all([Static(part) for part in diagnosis_text(diagnosis)])

    def action_close(self) -> None:
        self.dismiss(None)
