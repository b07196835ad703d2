"""One row per rank: its GPU, step time, compute/wait split, last step, last seen.

Fed by the straggler detector's ``rank_table()`` (what it concluded, so the
panel and the alert never disagree): the slow rank and a hung one are
marked. Under DDP every rank's step takes the same wall time; the split
is what names the slow one (it computes while the others wait on it).
Hidden when the run gives no per-rank data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ..health import rank_rows
from ..reading import locked
from ..text import fmt_clock, set_static

if TYPE_CHECKING:
    from ...monitor import Monitor
    from ...monitor_view import RankRowView


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}s"


def _ago(last_seen: float | None, now: float | None) -> str:
    if last_seen is None:
        return "-"
    if now is None:
        return fmt_clock(last_seen, None)[:8]
    ago = max(0.0, now - last_seen)
    return f"{ago:.0f}s ago" if ago < 120 else f"{ago / 60:.0f}m ago"


def ranks_table(rows: Sequence[RankRowView], now: float | None, tz: Any = None) -> Table:
    table = Table(box=None, padding=(0, 1), expand=False, show_edge=False, header_style="bold")
    for name, justify in (("rank", "right"), ("gpu", "right"), ("step", "right"), ("compute", "right"),
                          ("wait", "right"), ("last step", "right"), ("seen", "right"), ("", "left")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in rows:
        mark, style = "", ""
        if row.hung:
            mark, style = "HUNG", "bold white on red"
        elif row.slow:
            mark, style = "SLOW", "bold black on yellow"
        table.add_row(
            str(row.rank), "-" if row.gpu is None else str(row.gpu), _secs(row.step_seconds),
            _secs(row.compute_seconds), _secs(row.wait_seconds),
            "-" if row.last_step is None else str(row.last_step), _ago(row.last_seen, now),
            Text(mark, style=style), style="red" if row.hung else "yellow" if row.slow else "",
        )
    return table


class RanksPanel(Static):
    DEFAULT_CSS = """
    RanksPanel { border: round $panel-lighten-2; padding: 0 1; height: auto; max-height: 12; display: none; }
    RanksPanel.-shown { display: block; }
    """

    def __init__(self, *, tz: Any = None, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.tz = tz
        self.border_title = "ranks"
        self.rows: tuple = ()  # shown last (tests read it)
        self._key: tuple | None = None

    def update_view(self, monitor: Monitor) -> None:
        with locked(monitor):
            rows = tuple(rank_rows(monitor))
            now = monitor.now
        self.set_class(bool(rows), "-shown")
        self.rows = rows
        if not rows:
            return
        slow = [r.rank for r in rows if r.slow]
        hung = [r.rank for r in rows if r.hung]
        self.set_class(bool(slow or hung), "-alerting")
        title = Text("ranks")
        if hung:
            title.append(f"  rank {', '.join(map(str, hung))} hung ", style="bold white on red")
        elif slow:
            title.append(f"  rank {', '.join(map(str, slow))} slow ", style="bold black on yellow")
        key = (rows, None if now is None else int(now // 5))
        if key == self._key:
            return
        self._key = key
        self.border_title = title
        set_static(self, ranks_table(rows, now, self.tz), layout=True)
