"""A plotext chart as a Textual widget (textual-plotext is not a dependency).

plotext keeps one global figure; two charts drawing from two widgets (or
from a worker) would scribble over each other. Each widget here owns its
own ``_figure_class`` instance instead, so no lock is needed.

A plotext build costs 3-15 ms, which adds up to real CPU at 2 Hz over
nine charts. So the figure is rebuilt only when the data key or the size
changed, and the owner decides how often a new key is worth offering.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from rich.text import Text
from textual.widget import Widget

Draw = Callable[[Any, int, int], None]


def _new_figure() -> Any:
    # plotext ships neither stubs nor a py.typed marker.
    from plotext._figure import _figure_class  # type: ignore[import-untyped]

    return _figure_class()


class PlotextChart(Widget):
    DEFAULT_CSS = """
    PlotextChart { height: 1fr; min-height: 2; }
    """

    def __init__(self, *, placeholder: str = "", id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._figure: Any = None
        self._draw: Draw | None = None
        self._key: Hashable = None
        self._built_for: tuple[Hashable, int, int] | None = None
        self._text = Text("")
        self.placeholder = placeholder
        self.builds = 0  # how many times plotext ran (tests and the benchmark read it)

    @property
    def key(self) -> Hashable:
        return self._key

    def set_plot(self, key: Hashable, draw: Draw | None) -> None:
        """Offer new data. ``draw(fig, width, height)`` runs at the next paint
        only if ``key`` differs from the last one; None shows the placeholder.

        An equal key means the same picture: nothing is repainted, but the
        newer ``draw`` is kept for the next build a resize may need.
        """
        if key == self._key and (draw is None) == (self._draw is None):
            self._draw = draw
            return
        self._key = key
        self._draw = draw
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_size
        if self._draw is None or width < 8 or height < 2:
            return Text(self.placeholder, style="dim", no_wrap=True, overflow="ellipsis")
        wanted = (self._key, width, height)
        if wanted != self._built_for:
            if self._figure is None:
                self._figure = _new_figure()
            fig = self._figure
            fig.clear_figure()
            fig.plotsize(width, height)
            fig.theme("clear")
            try:
                self._draw(fig, width, height)
                built = fig.build()
            except Exception as exc:  # plotext on odd data: say so in place, never crash the UI
                built = f"(chart unavailable: {type(exc).__name__})"
            self._text = Text.from_ansi(built, no_wrap=True)
            self._text.rstrip()
            self._built_for = wanted
            self.builds += 1
        return self._text
