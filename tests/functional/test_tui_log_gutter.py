"""The log view's row cache keeps rows as shown, number column included (issue 18).

Line 10,000 widens the number column of every row on screen. A row cached
before that (the cache keyed on the line, not on the column's width) kept
its narrow column: the log's text stood one column off on the older rows.
"""

from __future__ import annotations

from tui_helpers import UTC, screen_text

from dflash_watch.monitor import Monitor
from dflash_watch.tui.app import DashboardApp
from dflash_watch.tui.widgets.log_view import ERROR, NORMAL, TB_EXC, TB_HEAD

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


async def test_a_file_counted_from_1_again_is_coloured_and_marked_as_the_new_file():
    """Rotated, truncated or made anew, a log's lines start again at 1: the
    view colours the new traceback (it kept the old lines' colours by
    number: the traceback plain, its line 2 red as the old line 2 was) and
    an alert's jump to line 4 marks the new line 4, not the old one."""
    monitor = Monitor(tz=UTC)
    old = "".join(f"[2025-11-29 10:00:00,000] [{'ERROR' if i == 2 else 'INFO'}] old line {i}\n" for i in range(1, 31))
    monitor.feed_text(LOG, old, 1, T0)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        view = app.query_one("#log-view")
        assert view.classes_by_lineno[2] == ERROR and view.classes_by_lineno[1] == NORMAL
        new = ("[2025-11-29 10:05:00,000] [INFO] step 1\n" "Traceback (most recent call last):\n"
               '  File "/srv/train.py", line 3, in <module>\n' "ValueError: new file\n")
        monitor.feed_text(LOG, new, 1, T0 + 300, 1)
        app.log_panel.update_view(monitor)
        await pilot.pause(0.3)
        assert [n for n, _ in view.lines] == [1, 2, 3, 4]
        assert view.classes_by_lineno[1] == NORMAL and view.classes_by_lineno[2] == TB_HEAD
        assert view.classes_by_lineno[4] == TB_EXC
        assert view.mark(4) and view.lines[view.shown[-1]][1] == "ValueError: new file"
