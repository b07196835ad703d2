"""The log panel: which file (rank logs are selectable), the filter box, the view.

The panel copies the chosen file's ring from the Monitor only when that
ring's newest line number moved, so a quiet log costs nothing per redraw.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input

from ..reading import locked
from ..text import plain
from .log_view import LogView

if TYPE_CHECKING:
    from ...monitor import Monitor


def log_hint(monitor: Monitor, logs_configured: bool) -> Text:
    """What the empty log view says: the tailer's latest word, and the fix."""
    notices = [n for n in list(monitor.notices) if "waiting" in n or "log" in n]
    out = Text()
    if notices:
        out.append(plain(notices[-1]), style="yellow")
        out.append("  ")
    if not logs_configured:
        out.append("no log files given: pass --log PATH (repeatable, globs ok) or set logs = [...] in the config",
                   style="yellow")
    else:
        out.append("no lines yet: check the path, or wait for the job to write its first line", style="dim")
    return out


class LogPanel(Vertical):
    BINDINGS = [Binding("escape", "clear_filter", "clear filter", show=False, id="clear_filter")]
    DEFAULT_CSS = """
    LogPanel { border: round $panel-lighten-2; }
    /* One line, no border, focused or not: Input:focus brings back a tall
       border, which on a 1-line box hid the text being typed. */
    LogPanel > Input { display: none; }
    LogPanel > Input, LogPanel > Input:focus { height: 1; border: none; padding: 0 1; background: $boost; }
    LogPanel.-filtering > Input { display: block; }
    LogPanel > LogView { height: 1fr; }
    """

    def __init__(self, *, logs_configured: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.logs_configured = logs_configured
        self.files: list[str] = []
        self.current: str | None = None
        self._seen: tuple | None = None
        self._title: Text | None = None
        self._subtitle: Text | None = None
        self.border_title = "log"
        self._view = LogView(id="log-view")  # held, not queried on every redraw

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter the log (Enter: keep, Esc: clear)", id="log-filter")
        yield self._view

    @property
    def view(self) -> LogView:
        return self._view

    def update_view(self, monitor: Monitor) -> None:
        with locked(monitor):
            partials = monitor.partial_lines
            files = sorted(set(monitor.lines) | set(partials))
            if self.current not in files:
                self.current = files[0] if files else None
            ring = monitor.lines.get(self.current) if self.current else None
            last = ring[-1][0] if ring else None
            # The unfinished last line (a bar drawn with '\r', its newline to come) stands last
            # (``RecentLines`` drops it when its newline comes).
            partial = partials.get(self.current) if self.current else None
            restarts = monitor.line_restarts.get(self.current, 0) if self.current else 0
            key = (self.current, last, len(ring) if ring else 0, restarts, partial)
            lines = None
            if key != self._seen and (ring is not None or partial is not None):
                lines = [*(ring or ()), *((partial,) if partial is not None else ())]
        self.files = files
        view = self.view
        if not files:
            view.empty_message = log_hint(monitor, self.logs_configured)
            view.refresh()
        if lines is not None:
            self._seen = key
            view.set_lines(self.current, lines, restarts)
        self._titles()

    def select_file(self, path: str) -> None:
        if path != self.current:
            self.current = path
            self._seen = None
            self._titles()

    def cycle(self, step: int = 1) -> str | None:
        if not self.files:
            return None
        i = self.files.index(self.current) if self.current in self.files else -1
        self.select_file(self.files[(i + step) % len(self.files)])
        return self.current

    def find_file(self, name: str) -> str | None:
        """The followed file an alert's ``source`` names, if any: its path, its
        display name (the basename), or a relative path it ends with. None for
        anything else (a probe or GPU-sample file is never a followed log)."""
        for path in self.files:
            if path == name or os.path.basename(path) == name:
                return path
        tail = "/" + name.lstrip("./")
        return next((path for path in self.files if "/" in name and path.endswith(tail)), None)

    def _titles(self) -> None:
        view = self.view
        name = os.path.basename(self.current) if self.current else "no log yet"
        title = Text("log ")
        title.append(plain(name), style="bold")
        if len(self.files) > 1:
            i = self.files.index(self.current) + 1 if self.current in self.files else 0
            title.append(f"  [{i}/{len(self.files)}, f: next]", style="dim")
        if title != self._title:
            self._title = self.border_title = title
        sub = Text()
        if view.filter_text:
            sub.append(f"filter: {plain(view.filter_text)} ({len(view.shown)} lines)  ", style="cyan")
        if view.following:
            sub.append("▶ following", style="green")
        else:
            more = f" +{view.new_while_paused} new" if view.new_while_paused else ""
            sub.append(f"‖ paused{more} (End: follow)", style="yellow")
        # Assigning a border title repaints the whole panel even when equal.
        if sub != self._subtitle:
            self._subtitle = self.border_subtitle = sub

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.view.set_filter(event.value)
        self._titles()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value:
            self.remove_class("-filtering")
        self.view.focus()

    def open_filter(self) -> None:
        self.add_class("-filtering")
        field = self.query_one(Input)
        field.focus()

    def action_clear_filter(self) -> None:
        self.clear_filter()

    def clear_filter(self) -> None:
        field = self.query_one(Input)
        field.value = ""
        self.view.set_filter("")
        self.remove_class("-filtering")
        self.view.focus()
        self._titles()
