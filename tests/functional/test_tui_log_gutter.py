"""The log view's row cache keeps rows as shown, number column included (issue 18).

Line 10,000 widens the number column of every row on screen. A row cached
before that (the cache keyed on the line, not on the column's width) kept
its narrow column: the log's text stood one column off on the older rows.
"""

from __future__ import annotations

from tui_helpers import UTC, screen_text

from dflash_watch.monitor import Monitor
from dflash_watch.tui.app import DashboardApp

T0 = 1764410400.0
LOG = "/runs/x/train.log"


def log_lines(monitor: Monitor, first: int, n: int) -> None:
    text = "".join(f"[2025-11-29 10:00:00,000] [INFO] prefetched batch {i}\n" for i in range(first, first + n))
    monitor.feed_text(LOG, text, first, T0)


async def test_rows_painted_before_the_number_column_widened_are_repainted_with_it():
    monitor = Monitor(tz=UTC)
    log_lines(monitor, 9950, 50)  # up to line 9,999: four digits
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        before = [row for row in screen_text(app).splitlines() if "batch" in row]
        assert before and all(row.startswith(("9", " ")) and row.index("[") == 5 for row in before)
        log_lines(monitor, 10000, 1)  # five digits: the column widens by one
        app.log_panel.update_view(monitor)
        await pilot.pause(0.1)
        rows = [row for row in screen_text(app).splitlines() if "batch" in row]
        assert rows[-1].startswith("10000 [")
        assert len(rows) > 2 and rows[0].startswith(" 99")
        assert {row.index("[") for row in rows} == {6}, rows
