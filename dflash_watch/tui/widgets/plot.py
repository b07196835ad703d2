"""A plotext chart as a Textual widget (textual-plotext is not a dependency).

plotext keeps one global figure; two charts drawing from two widgets (or
from a worker) would scribble over each other. Each widget here owns its
own ``_figure_class`` instance instead, so no lock is needed.

A plotext build costs 3-15 ms, which adds up to real CPU at 2 Hz over
nine charts. So the figure is rebuilt only when the data key or the size
changed, and the owner decides how often a new key is worth offering.
Charts that draw the same picture share one build: the eight GPUs of a
data-parallel job usually hold the same memory, and a key that names the
picture (``set_plot(..., share=...)``) lets seven of them reuse the first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from rich.text import Text
from textual.content import Content
from textual.widget import Widget

Draw = Callable[[Any, int, int], None]
# Built pictures by (share, key, width, height), the newest last; a few
# screens' worth of charts.
_SHARED: OrderedDict[tuple[Hashable, Hashable, int, int], Content] = OrderedDict()
_SHARED_MAX = 32


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
        self._share: Hashable = None
        self._built_for: tuple[Hashable, int, int] | None = None
        # The built picture, as Textual's own Content: converted from plotext's
        # ANSI once per build, not at every paint of every chart that shows it.
        self._text = Content("")
        self.placeholder = placeholder
        self.builds = 0  # how many pictures this chart made, built or shared (tests read it)
        self.plotted = 0  # how many of them plotext built here

    @property
    def key(self) -> Hashable:
        return self._key

    def set_plot(self, key: Hashable, draw: Draw | None, *, share: Hashable = None) -> None:
        """Offer new data. ``draw(fig, width, height)`` runs at the next paint
        only if ``key`` differs from the last one; None shows the placeholder.

        An equal key means the same picture: nothing is repainted, but the
        newer ``draw`` is kept for the next build a resize may need.
        ``share``: the key names the picture itself (not just the data's
        age), so any chart offered an equal ``(share, key)`` at the same
        size may show this one's build instead of running plotext again.
        """
        self._share = share
        if key == self._key and (draw is None) == (self._draw is None):
            self._draw = draw
            return
        self._key = key
        self._draw = draw
        self.refresh()

    def render(self) -> Text | Content:
        width, height = self.content_size
        if self._draw is None or width < 8 or height < 2:
            return Text(self.placeholder, style="dim", no_wrap=True, overflow="ellipsis")
        wanted = (self._key, width, height)
        if wanted != self._built_for:
            shared = None if self._share is None else (self._share, *wanted)
            text = None if shared is None else _SHARED.get(shared)
            if text is None:
                text = self._build(self._draw, width, height)
                if shared is not None:
                    _SHARED[shared] = text
                    if len(_SHARED) > _SHARED_MAX:
                        _SHARED.popitem(last=False)
            self._text = text
            self._built_for = wanted
            self.builds += 1
        return self._text

    def _build(self, draw: Draw, width: int, height: int) -> Content:
        if self._figure is None:
            self._figure = _new_figure()
        fig = self._figure
        fig.clear_figure()
        fig.plotsize(width, height)
        fig.theme("clear")
        try:
            draw(fig, width, height)
            built = fig.build()
        except Exception as exc:  # plotext on odd data: say so in place, never crash the UI
            built = f"(chart unavailable: {type(exc).__name__})"
        text = Text.from_ansi(built, no_wrap=True)
        text.rstrip()
        self.plotted += 1
        return Content.from_rich_text(text, console=self.app.console)
