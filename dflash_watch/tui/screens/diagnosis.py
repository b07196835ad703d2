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

import re
from collections.abc import Collection
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from dflash_watch.detectors.diagnosis_rules import size

from ...baseline.diagnose import Diagnosis
from ...report import format_rate
from ..text import plain

GIB = 1 << 30


def _value(value: Any, what: str = "") -> str:
    """A profile value as an engineer reads it, in the unit the row's ``says`` uses.

    One quantity reads one way on the screen: the compile cache in the
    ranking's decimal sizes (``353 MB``, as ``du -h --si``), a GPU's memory
    band in GiB with one decimal, as its ``says`` line writes them.
    """
    if value is None:
        return "missing"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        if what == "throughput":
            return format_rate(float(value))
        if what == "padding_efficiency":
            return f"{value:.0%}"
        if what == "memory_flatness" or what.endswith("_bytes"):
            return f"{value / GIB:.1f} GiB"
        return f"{value:.4g}" if isinstance(value, float) else str(value)
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            if k == "path":
                continue
            if k.endswith("bytes") and isinstance(v, (int, float)):
                parts.append(size(v))
            elif isinstance(v, (int, float)) and float(v).is_integer():
                parts.append(f"{int(v)} {k}")
            else:
                parts.append(f"{k} {plain(str(v))}")
        return ", ".join(parts)
    if isinstance(value, (list, tuple)):
        text = " ".join(str(v) for v in value)
        return text if len(text) <= 60 else text[:59] + "…"
    return str(value)


_IS_FIRING = re.compile(r"the (\w+) alert is firing")


def resolved_said(says: str, firing: Collection[str] | None) -> str:
    """``says`` with "the X alert is firing" corrected where X is not firing now.

    The ranking is asked about every symptom of the session, the resolved
    ones too (a slowdown may resolve as the job dies of it), and words them
    as firing; the screen knows which alerts fire now and never calls a
    resolved one firing.
    """
    if firing is None:
        return says
    return _IS_FIRING.sub(
        lambda m: m.group(0) if m.group(1) in firing else f"the {m.group(1)} alert fired this session, resolved since",
        says)


def diagnosis_text(diagnosis: Diagnosis, firing: Collection[str] | None = None) -> list[Any]:
    """The renderables of the screen, in reading order (tested without a terminal).

    ``firing``: the detectors with an alert firing now; the others among the
    session's symptoms are marked resolved. None: not known (all shown as
    the session's symptoms).
    """
    parts: list[Any] = []
    head = Text()
    if diagnosis.symptoms:
        head.append("symptoms this session: ", style="bold")
        for i, name in enumerate(diagnosis.symptoms):
            if i:
                head.append(", ")
            now = firing is None or name in firing
            head.append(plain(name), style="bold red" if now else "dim")
            if firing is not None:
                head.append(" (firing)" if now else " (resolved)", style="red" if now else "dim")
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
        raw = str(change.get("what", "?"))
        what = plain(raw)
        if change.get("gpu") is not None:
            what += f" (GPU {change['gpu']})"
        was, current = _value(change.get("baseline"), raw), _value(change.get("now"), raw)
        table.add_row(Text(f"{rank}."), Text(what), Text(plain(f"{was} -> {current}"), style="dim"))
    parts += [Text(""), table]
    for rank, change in enumerate(diagnosis.changes, 1):
        says = change.get("says")
        block = Text()
        block.append(f"{rank}. ", style="bold")
        block.append(plain(resolved_said(str(says or change.get("what", "")), firing)),
                     style="bold" if rank == 1 else "")
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
    BINDINGS = [Binding("escape,q,d", "close", "close", show=True, id="diagnosis_close")]

    def __init__(self, diagnosis: Diagnosis, refresh: Any = None, refresh_s: float = 5.0,
                 firing: Collection[str] | None = None) -> None:
        super().__init__()
        self.diagnosis = diagnosis
        self.firing = None if firing is None else frozenset(firing)
        # Asked every ``refresh_s`` while the screen is up: a run that is
        # degrading goes on changing under it (a new symptom, the crash).
        self._refresh = refresh
        self._refresh_s = refresh_s

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diagnosis-body") as scroll:
            scroll.border_title = "what changed since the good run, most likely cause first (Esc: close)"
            for part in diagnosis_text(self.diagnosis, self.firing):
                yield Static(part)

    def on_mount(self) -> None:
        if self._refresh is not None:
            self.set_interval(self._refresh_s, self._refresh)

    def show(self, diagnosis: Diagnosis, firing: Collection[str] | None = None) -> None:
        """Draw a newer diagnosis in place (the scroll position is kept)."""
        firing = None if firing is None else frozenset(firing)
        if diagnosis == self.diagnosis and firing == self.firing:
            return
        self.diagnosis = diagnosis
        self.firing = firing
        body = self.query_one("#diagnosis-body", VerticalScroll)
        body.remove_children()
        body.mount_all([Static(part) for part in diagnosis_text(diagnosis, firing)])

    def action_close(self) -> None:
        self.dismiss(None)
