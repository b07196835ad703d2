"""The alerts panel: firing first (most severe, newest), then the recent past.

Rows are rebuilt only when the AlertBook changed (a new alert, a resolve,
an acknowledgement), and the highlighted alert keeps its place across a
rebuild so a row does not jump away under the cursor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from dflash_watch.detectors.base import Alert

from ..reading import locked
from ..text import SEVERITY_ICON, SEVERITY_STYLE, fmt_clock, plain

if TYPE_CHECKING:
    from ...monitor import Monitor

MAX_ROWS = 200
_RANK = {"info": 0, "warning": 1, "critical": 2}


class AlertChosen(Message):
    """The user selected an alert: show its evidence, jump to its line."""

    def __init__(self, alert: Alert) -> None:
        super().__init__()
        self.alert = alert


def alert_rows(monitor: Monitor) -> list[tuple[Alert, bool, bool]]:
    """(alert, firing, acknowledged) in panel order, copied under the Monitor's lock."""
    with locked(monitor):
        book = monitor.alerts
        firing = book.firing()
        rows = [(a, True, book.is_acked(a)) for a in firing]
        shown = {id(a) for a in firing}
        for alert in reversed(book.history):
            if len(rows) >= MAX_ROWS:
                break
            if id(alert) not in shown:
                rows.append((alert, False, False))
    return rows


class AlertsPanel(Vertical):
    DEFAULT_CSS = """
    AlertsPanel { border: round $panel-lighten-2; }
    AlertsPanel > DataTable { height: 1fr; background: $surface; scrollbar-size-horizontal: 0; }
    AlertsPanel > .alerts-empty { padding: 0 1; color: $text-muted; height: auto; }
    """

    def __init__(self, *, tz: Any = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.tz = tz
        self._seen: tuple | None = None
        self.rows: list[tuple[Alert, bool, bool]] = []
        self.border_title = "alerts"

    def compose(self) -> ComposeResult:
        yield Static("no alerts: watching memory, throughput, stalls, crashes and recompiles", classes="alerts-empty")
        table: DataTable = DataTable(cursor_type="row", show_header=False, zebra_stripes=False, cell_padding=0)
        table.add_columns("sev", "time", "what", "message")
        yield table

    @property
    def table(self) -> DataTable:
        return self.query_one(DataTable)

    def update_view(self, monitor: Monitor) -> None:
        with locked(monitor):
            key = (monitor.alerts.total, len(monitor.alerts.unacked()), len(monitor.alerts.firing()))
        if key == self._seen:
            return
        self._seen = key
        rows = alert_rows(monitor)
        n_firing = sum(1 for _, f, _ in rows if f)
        n_unacked = sum(1 for _, f, acked in rows if f and not acked)
        loud = any(f and not acked and alert.severity != "info" for alert, f, acked in rows)
        title = Text("alerts")
        if n_firing:
            title.append(f"  {n_firing} firing", style="bold red" if loud else "cyan" if n_unacked else "yellow")
            if n_firing != n_unacked:
                title.append(f" ({n_firing - n_unacked} acked)", style="dim")
        self.border_title = title
        self.set_class(loud, "-alerting")
        self.query_one(".alerts-empty", Static).display = not rows
        table = self.table
        table.display = bool(rows)
        keep = self._kept(rows)
        table.clear()
        for i, (alert, firing, acked) in enumerate(rows):
            table.add_row(*self._cells(alert, firing, acked), key=str(i))
        self.rows = rows
        row = next((i for i, (alert, _, _) in enumerate(rows) if alert is keep), 0) if keep is not None else 0
        table.move_cursor(row=row, animate=False)

    def _kept(self, rows: list[tuple[Alert, bool, bool]]) -> Alert | None:
        """The alert the highlight stays on across a rebuild; None: the top row.

        The highlight follows the top row (the most severe, newest alert:
        what Enter opens) until the user moves it off the top. A row the
        user chose keeps the highlight, unless an alert more severe than it
        fires since: a crash after a warning takes the highlight back, so
        Enter opens the crash and the list shows it.
        """
        selected = self.selected
        if selected is None or self.table.cursor_row == 0:
            return None
        rank = _RANK.get(selected.severity, 0)
        known = {id(alert) for alert, _, _ in self.rows}
        if any(firing and id(alert) not in known and _RANK.get(alert.severity, 0) > rank
               for alert, firing, _ in rows):
            return None
        return selected

    def _cells(self, alert: Alert, firing: bool, acked: bool) -> list[Text]:
        style = SEVERITY_STYLE.get(alert.severity, "")
        if not firing:
            style = "dim"
        icon = "✓" if acked else SEVERITY_ICON.get(alert.severity, "?") if firing else ("○" if alert.state == "resolved" else "·")
        detector = alert.detector + (f"/{alert.kind}" if alert.kind else "")
        if alert.gpu is not None:
            detector += f" gpu{alert.gpu}"
        first = alert.message.splitlines()[0] if alert.message else ""
        if alert.state == "resolved":
            first = "resolved: " + first
        return [
            Text(f" {icon} ", style=style),
            Text(fmt_clock(alert.time, self.tz)[:5] + " ", style="dim" if not firing else ""),
            Text(plain(detector) + " ", style=style),
            Text(plain(first[:240]), style="dim" if not firing or acked else ""),
        ]

    @property
    def selected(self) -> Alert | None:
        table = self.table
        row = table.cursor_row
        if not self.rows or row is None or not (0 <= row < len(self.rows)):
            return None
        return self.rows[row][0]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        index = event.cursor_row
        if 0 <= index < len(self.rows):
            self.post_message(AlertChosen(self.rows[index][0]))
