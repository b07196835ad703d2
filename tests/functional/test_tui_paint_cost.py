"""A frame paints what moved, not the containers behind it (issue 20: <= 2% of a core).

Textual asks every widget whose clip overlaps a frame's dirty box for its
rows, and a container that holds the box whole for all of them: a log
update asked the screen for 40 rows and the body for 38, each through the
styles cache and the line filters, though the children cover both
(``widgets/backdrop.py``).
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


async def test_a_log_update_does_not_paint_the_screen_or_body_rows_through_the_styles_cache(monkeypatch):
    from textual._styles_cache import StylesCache

    monitor = Monitor(tz=UTC)
    log_lines(monitor, 1, 100)
    app = DashboardApp(monitor, tz=UTC, clock=lambda: T0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        painted: list[str] = []
        real = StylesCache.render_widget

        def recording(cache, widget, crop):
            painted.append(widget.id or type(widget).__name__)
            return real(cache, widget, crop)

        monkeypatch.setattr(StylesCache, "render_widget", recording)
        log_lines(monitor, 101, 100)
        app.log_panel.update_view(monitor)
        await pilot.pause(0.1)
        assert "log-view" in painted  # a frame was painted
        assert "_default" not in painted and "body" not in painted, painted
        assert "prefetched batch 200" in screen_text(app).splitlines()[-1]
