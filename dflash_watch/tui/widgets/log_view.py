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

from rich.control import strip_control_codes
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import MouseScrollUp
from textual.geometry import Region, Size
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
_GUTTER = Style(color="bright_black")
_GUTTER_MARKED = Style(color="black", bgcolor="yellow", bold=True)
_TB_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")


def _plain_line(text: str) -> bool:
    """True when no word that ``classify`` looks for is in ``text``: most lines of a log.

    Plain ``in`` tests, not a generator per word list: at 100 lines/s the
    full rules cost 4 us a line, this 0.7 us. Keep it a superset of the
    words in ``_ERROR_WORDS``, ``_WARNING_WORDS`` and ``_TB_CHAIN``.
    """
    return not ("ERROR" in text or "WARN" in text or "Traceback" in text or "CRITICAL" in text
                or "FATAL" in text or "During handling" in text or "The above exception" in text)


def classify(text: str, previous: int) -> int:
    """The class of one line given the class of the line before it."""
    if previous in (NORMAL, ERROR, WARNING) and _plain_line(text):
        return NORMAL  # outside a traceback only the words count, and there are none
    return _classify_rules(text, previous)


def _classify_rules(text: str, previous: int) -> int:
    """``classify`` without its shortcut (tests compare the two)."""
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
        self._restarts = 0
        self.filter_text = ""
        self.marked: int | None = None  # the line an alert cited
        self._cache: OrderedDict[tuple, Strip] = OrderedDict()
        self._gutter = 5
        self._width = 0
        self.new_while_paused = 0
        self.empty_message: Text = Text("")
        self._paint: tuple[Style, int] | None = None  # (base style, width) while render_lines runs

    # -- data -------------------------------------------------------------------
    def set_lines(self, path: str | None, lines: list[tuple[int, str]], restarts: int = 0) -> None:
        """The ring's current content for ``path`` (copied by the caller);
        ``restarts``: how often the file's lines were counted from 1 again
        (``RecentLines.line_restarts``): the lines seen before are another
        file's, whose colours and numbers must not carry over."""
        if path != self.path or restarts != self._restarts or (
            lines and self.lines and lines[0][0] < self.lines[0][0]
        ):
            self._reset(path)
            self._restarts = restarts
        anchor = self._top_lineno() if not self.following else None
        before = self.lines[-1][0] if self.lines else 0
        redrawn = bool(lines and self.lines and lines[-1][0] == before == self._last_lineno
                       and lines[-1][1] != self.lines[-1][1])
        self.lines = lines
        if redrawn:  # the unfinished last line drawn anew (a bar), or its newline come: classed again
            lineno = lines[-1][0]
            self._last_class = classify(lines[-1][1], self.classes_by_lineno.get(lineno - 1, NORMAL))
            self.classes_by_lineno[lineno] = self._last_class
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
        laid_out = bool(self.scrollable_content_region.height)
        if size != self.virtual_size:
            laid_out = self._resize_virtual(size) and laid_out
        if self.following:
            self._to_end()
            if not laid_out:
                # The first layout (or the one a new width asked for) is still to come:
                # settle once it has. Not at every redraw: a callback a second for nothing.
                self.call_after_refresh(self._to_end)
        elif anchor is not None:
            for row, i in enumerate(self.shown):
                if self.lines[i][0] >= anchor:
                    self.scroll_to(y=row, animate=False)
                    break
        self.refresh()

    def _resize_virtual(self, size: Size) -> bool:
        """Set the scrollable size; without a screen layout when only the height grew or shrank.

        Assigning ``virtual_size`` asks for a layout of the whole screen.
        While the ring fills (2000 lines: the first 20 s of a run at 100
        lines/s, again after every file switch or filter) that was a layout
        per redraw, twice the cost of the paint itself. A layout is only
        needed when the scrollbar appears or goes, or the width changes:
        otherwise the view's own size is fixed, so only the scrollbar needs
        the new height. True when done without a layout (the scroll range is already right).
        """
        old = self.virtual_size
        rows = self.scrollable_content_region.height
        if (size.width == old.width and self.show_vertical_scrollbar and rows
                and old.height > rows and size.height > rows):
            self.set_reactive(LogView.virtual_size, size)
            self.vertical_scrollbar.window_virtual_size = size.height
            if self.scroll_y > self.max_scroll_y:  # fewer rows than before: stay within them
                self.scroll_y = self.max_scroll_y
            return True
        self.virtual_size = size
        return False

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
    def render_lines(self, crop: Region) -> list[Strip]:
        """Render the rows in ``crop``, reading the base style and width once for all of them.

        ``rich_style`` walks the ancestors for the background on every
        read: per row it was half the cost of painting a scrolled log.
        """
        self._paint = (self.rich_style, self.scrollable_content_region.width)
        try:
            return super().render_lines(crop)
        finally:
            self._paint = None

    def render_line(self, y: int) -> Strip:
        base, width = self._paint or (self.rich_style, self.scrollable_content_region.width)
        row = int(self.scroll_y) + y
        if not self.shown:
            if y == 0 and not self.lines:
                segments = list(self.empty_message.render(self.app.console))
                return Strip(segments).crop_extend(0, width, base)
            return Strip.blank(width, base)
        if row >= len(self.shown):
            return Strip.blank(width, base)
        lineno, text = self.lines[self.shown[row]]
        scroll_x = int(self.scroll_x)
        marked = lineno == self.marked
        # The cache holds rows as shown (cropped and padded): a row painted
        # again costs a lookup, a new one builds one strip, not three. The
        # gutter is part of the row: line 10,000 widens the number column of
        # every row, and a row cached before it would keep the narrow one.
        key = (lineno, text, self.filter_text, marked, scroll_x, width, base, self._gutter)
        strip = self._cache.get(key)
        if strip is None:
            strip = None if scroll_x or marked or self.filter_text else self._fitted_strip(lineno, text, width, base)
            if strip is None:
                strip = self._render_strip(lineno, text).crop_extend(scroll_x, scroll_x + width, base)
            self._cache[key] = strip
            if len(self._cache) > 512:
                self._cache.popitem(last=False)
        return strip

    def _fitted_strip(self, lineno: int, text: str, width: int, base: Style) -> Strip | None:
        """What ``_render_strip(...).crop_extend(0, width, base)`` gives, built as one strip.

        Only for a line of printable ASCII (one cell per character), not
        filtered, not marked, not scrolled sideways: most lines of a log. At
        100 lines/s every row on screen is new at every redraw, and the
        general path builds three strips a row (Textual's strips are not
        cheap: each carries seven caches). None: take the general path.
        """
        number = f"{lineno:>{self._gutter - 1}} "
        shown = strip_control_codes(plain(text))
        if width <= len(number) or not (shown.isascii() and shown.isprintable()):
            return None
        cls = self.classes_by_lineno.get(lineno, NORMAL)
        style = STYLES[cls] if cls != NORMAL and shown else None
        room = width - len(number)
        segments = [Segment(number, _GUTTER)]
        if len(shown) > room:
            segments.append(Segment(shown[:room], style))
        else:
            segments.append(Segment(shown, style))
            if len(shown) < room:
                segments.append(Segment(" " * (room - len(shown)), base))
        return Strip(segments, width)

    def _render_strip(self, lineno: int, text: str) -> Strip:
        cls = self.classes_by_lineno.get(lineno, NORMAL)
        marked = lineno == self.marked
        gutter_style = _GUTTER if not marked else _GUTTER_MARKED
        segments = [Segment(f"{lineno:>{self._gutter - 1}} ", gutter_style)]
        if self.filter_text:
            body = Text(plain(text), no_wrap=True, end="")
            if cls != NORMAL:
                # Text.render drops the base style (its console renders apply it): use a span.
                body.stylize(STYLES[cls])
            body.highlight_words([self.filter_text], style="reverse", case_sensitive=False)
            segments.extend(body.render(self.app.console))
        else:
            # What Text(...).render gives for one style over the whole line, without
            # building a Text: a log repaints all its rows at every redraw.
            shown = strip_control_codes(plain(text))
            segments.append(Segment(shown, STYLES[cls] if cls != NORMAL and shown else None))
        strip = Strip(segments)
        if marked:
            strip = strip.apply_style(Style(bgcolor="grey23"))
        return strip
