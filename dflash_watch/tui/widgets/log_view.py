"""The log view: a line-API scroll view over the Monitor's recent lines of one file.

Why a custom view instead of RichLog: a filter must re-select from the
lines already seen, the ring of recent lines drops from the front while
the user reads a paused view, and only the visible rows should cost
anything at 100 lines/s. So the view keeps the ring's (lineno, text)
pairs, renders only what is on screen, and anchors a paused view on the
line number at its top rather than on a row index.

Text is shown, never interpreted: every line goes through ``text.plain``
into a ``Text`` object (no markup parsing, escapes stripped).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import OrderedDict
from operator import itemgetter

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import MouseScrollUp
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..text import plain

# Per-line classes; tracebacks need state across lines, so they are
# computed once per new line, carrying the state of the previous one.
NORMAL, TB_HEAD, TB_FRAME, TB_CODE, TB_EXC, ERROR, WARNING = range(7)
STYLES = {
    NORMAL: Style(),
    TB_HEAD: Style(color="red", bold=True),
    TB_FRAME: Style(color="red"),
    TB_CODE: Style(color="bright_black"),
    TB_EXC: Style(color="bright_red", bold=True),
    ERROR: Style(color="red"),
    WARNING: Style(color="yellow"),
}
_EXC_LINE = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)\b:?")
_ERROR_WORDS = ("ERROR", "CRITICAL", "FATAL", "Traceback")
_WARNING_WORDS = ("WARNING", "WARN ")
_lineno = itemgetter(0)
_TB_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")


def classify(text: str, previous: int) -> int:
    """The class of one line given the class of the line before it."""
    body = text.lstrip("[0123456789]:, ") if text[:1] == "[" else text
    if "Traceback (most recent call last)" in text:
        return TB_HEAD
    in_tb = previous in (TB_HEAD, TB_FRAME, TB_CODE)
    if in_tb or previous == TB_EXC:
        if body.startswith("  File ") or text.lstrip().startswith('File "'):
            return TB_FRAME
        if in_tb and (body.startswith("    ") or body.startswith("\t") or body.strip() in ("", "^", "~")):
            return TB_CODE
        if in_tb and _EXC_LINE.match(text):
            return TB_EXC
        if in_tb and not body.startswith(" ") and ":" in body:
            return TB_EXC
    if any(chain in text for chain in _TB_CHAIN):
        return TB_HEAD
    if any(w in text for w in _ERROR_WORDS):
        return ERROR
    if any(w in text for w in _WARNING_WORDS):
        return WARNING
    return NORMAL


class LogView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LogView { background: $surface; scrollbar-size-horizontal: 0; }
    """

    following: reactive[bool] = reactive(True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.path: str | None = None
        self.lines: list[tuple[int, str]] = []
        self.shown: list[int] = []  # indices into lines, after the filter
        self.classes_by_lineno: dict[int, int] = {}
        self._last_class = NORMAL
        self._last_lineno = 0
        self.filter_text = ""
        self.marked: int | None = None  # the line an alert cited
        self._cache: OrderedDict[tuple, Strip] = OrderedDict()
        self._gutter = 5
        self._width = 0
        self.new_while_paused = 0
        self.empty_message: Text = Text("")

    # -- data -------------------------------------------------------------------
    def set_lines(self, path: str | None, lines: list[tuple[int, str]]) -> None:
        """The ring's current content for ``path`` (copied by the caller)."""
        if path != self.path or (lines and self.lines and lines[0][0] < self.lines[0][0]):
            self._reset(path)
        anchor = self._top_lineno() if not self.following else None
        before = self.lines[-1][0] if self.lines else 0
        self.lines = lines
        # The ring is in line order: only its tail is new, so classify just that.
        fresh = bisect_right(lines, self._last_lineno, key=_lineno)
        for lineno, text in lines[fresh:]:
            self._last_class = classify(text, self._last_class)
            self.classes_by_lineno[lineno] = self._last_class
            self._last_lineno = lineno
        if lines and len(self.classes_by_lineno) > 2 * len(lines):
            first = lines[0][0]
            self.classes_by_lineno = {k: v for k, v in self.classes_by_lineno.items() if k >= first}
        if not self.following and lines:
            self.new_while_paused += sum(1 for n, _ in lines if n > before) if before else 0
        self._apply(anchor, bisect_right(lines, before, key=_lineno) if before else 0)

    def set_filter(self, text: str) -> None:
        if text == self.filter_text:
            return
        self.filter_text = text
        self._width = 0
        self._cache.clear()
        self._apply(None if self.following else self._top_lineno())

    def mark(self, lineno: int | None) -> bool:
        """Highlight ``lineno`` and scroll it into the middle; pauses following."""
        self.marked = lineno
        self._cache.clear()
        if lineno is None:
            self.refresh()
            return False
        if self.filter_text and not any(self.lines[i][0] == lineno for i in self.shown):
            self.set_filter("")
        for row, i in enumerate(self.shown):
            if self.lines[i][0] >= lineno:
                self.following = False
                self.scroll_to(y=max(0, row - self.scrollable_content_region.height // 2), animate=False)
                self.refresh()
                return self.lines[i][0] == lineno
        self.refresh()
        return False

    def _reset(self, path: str | None) -> None:
        self.path = path
        self.lines = []
        self.shown = []
        self.classes_by_lineno = {}
        self._last_class = NORMAL
        self._last_lineno = 0
        self._width = 0
        self._cache.clear()
        self.new_while_paused = 0

    def _apply(self, anchor: int | None, fresh: int = 0) -> None:
        """Re-select and re-size; ``fresh``: index of the first line not seen at the last call.

        Without a filter and with an unchanged gutter, the lines seen before
        are already within ``_width``, so only the fresh ones are measured.
        """
        needle = self.filter_text.lower()
        lines = self.lines
        if needle:
            self.shown = [i for i, (_, t) in enumerate(lines) if needle in t.lower()]
        else:
            self.shown = list(range(len(lines)))
        last = lines[-1][0] if lines else 0
        gutter = max(4, len(str(last))) + 1
        if needle or gutter != self._gutter or not self._width or not fresh:
            measured = (len(lines[i][1]) for i in self.shown)
        else:
            measured = (len(t) for _, t in lines[fresh:])
        self._gutter = gutter
        width = max(measured, default=0) + gutter + 1
        # A virtual size change costs a layout of the whole screen: let the
        # width only grow (until the file or filter changes) so that a
        # following view settles at one size once the ring is full.
        width = max(width, self._width)
        self._width = width
        size = Size(width, len(self.shown))
        if size != self.virtual_size:
            self.virtual_size = size
        if self.following:
            self._to_end()
            # The first layout may not have happened yet: settle once it has.
            self.call_after_refresh(self._to_end)
        elif anchor is not None:
            for row, i in enumerate(self.shown):
                if self.lines[i][0] >= anchor:
                    self.scroll_to(y=row, animate=False)
                    break
        self.refresh()

    def _top_lineno(self) -> int | None:
        row = int(self.scroll_y)
        if 0 <= row < len(self.shown):
            return self.lines[self.shown[row]][0]
        return None

    # -- following ---------------------------------------------------------------
    def watch_following(self, following: bool) -> None:
        if following:
            self.new_while_paused = 0
            self.marked = None
            self._cache.clear()
            self._to_end()

    def _to_end(self) -> None:
        if self.following:
            self.scroll_to(y=max(0, len(self.shown) - self.scrollable_content_region.height), animate=False,
                           immediate=True)

    def on_resize(self) -> None:
        self._to_end()

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.following = False

    def action_scroll_up(self) -> None:
        self.following = False
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.following = False
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.following = False
        super().action_scroll_home()

    def action_scroll_end(self) -> None:
        self.following = True

    # -- rendering -----------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = int(self.scroll_y) + y
        base = self.rich_style
        if not self.shown:
            if y == 0 and not self.lines:
                segments = list(self.empty_message.render(self.app.console))
                return Strip(segments).crop_extend(0, width, base)
            return Strip.blank(width, base)
        if row >= len(self.shown):
            return Strip.blank(width, base)
        lineno, text = self.lines[self.shown[row]]
        key = (lineno, text, self.filter_text, lineno == self.marked)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render(lineno, text)
            self._cache[key] = strip
            if len(self._cache) > 512:
                self._cache.popitem(last=False)
        return strip.crop_extend(int(self.scroll_x), int(self.scroll_x) + width, base)

    def _render(self, lineno: int, text: str) -> Strip:
        cls = self.classes_by_lineno.get(lineno, NORMAL)
        marked = lineno == self.marked
        body = Text(plain(text), no_wrap=True, end="")
        if cls != NORMAL:
            # Text.render drops the base style (its console renders apply it): use a span.
            body.stylize(STYLES[cls])
        if self.filter_text:
            body.highlight_words([self.filter_text], style="reverse", case_sensitive=False)
        gutter_style = Style(color="bright_black") if not marked else Style(color="black", bgcolor="yellow", bold=True)
        segments = [Segment(f"{lineno:>{self._gutter - 1}} ", gutter_style)]
        segments.extend(body.render(self.app.console))
        strip = Strip(segments)
        if marked:
            strip = strip.apply_style(Style(bgcolor="grey23"))
        return strip
