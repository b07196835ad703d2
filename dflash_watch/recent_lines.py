"""The Monitor's recent raw lines per log file, for the log view.

A mixin of ``Monitor`` (it shares its lock): the rings are a view's
concern, not the detectors', and a catch-up reads thousands of chunks of
which only the last one's lines are ever shown, so that chunk is kept
whole and split only when a view reads (``lines``).
"""

from __future__ import annotations

import threading
from collections import deque

# The most of one line the log view keeps: a few screens' width. A log of
# 1 MB lines (a tokenizer dump, a printed tensor) held whole in a ring of
# 2000 would be 2 GB; the view shows a line's start anyway.
VIEW_LINE_MAX = 16 * 1024


def _shortened(line: str) -> str:
    cut = len(line) - VIEW_LINE_MAX
    return line if cut <= 0 else f"{line[:VIEW_LINE_MAX]} … ({cut:,} more characters)"


class RecentLines:
    """Per file, the last ``keep_lines`` lines as (line number, text); 0 keeps none (replay)."""

    # The Monitor's: held by every writer, and by a view while it copies.
    _lock: threading.RLock

    def _init_lines(self, keep_lines: int) -> None:
        self.keep_lines = keep_lines
        self._lines: dict[str, deque[tuple[int, str]]] = {}
        # Per file, the last chunk that alone fills its ring, not yet split
        # into lines (text, its first line number, its line count): a
        # catch-up reads thousands of such chunks, and only the last one's
        # lines are ever shown. ``lines`` splits it when a view reads.
        self._unsplit: dict[str, tuple[str, int, int]] = {}
        # Per file, how many times its lines were counted from 1 again
        # (its ring cleared): a view that colours and marks lines by their
        # numbers starts over when this moves.
        self.line_restarts: dict[str, int] = {}
        # Per file, its unfinished last line as drawn now (line number, its
        # newest state): a tqdm bar redrawn with '\r' and no newline for a
        # whole epoch is a file of no lines, and the view said "no lines
        # yet: check the path" for an hour while the header read the bar.
        self.partial_lines: dict[str, tuple[int, str]] = {}

    @property
    def lines(self) -> dict[str, deque[tuple[int, str]]]:
        """Recent raw lines per file for the log view: (line number, text), oldest first."""
        with self._lock:
            for path in list(self._unsplit):
                self._split_pending(path)
            return self._lines

    def keep_partial(self, path: str, text: str, lineno: int) -> None:
        """The unfinished line ``lineno`` as drawn so far (``'\r'``-joined
        states): its newest state stands last in the view until its newline."""
        if not self.keep_lines:
            return
        states = [state for state in text.rstrip("\n").split("\r") if state.strip()]
        if states:
            with self._lock:
                self.partial_lines[path] = (lineno, _shortened(states[-1]))

    def _drop_partial(self, path: str, last_lineno: int) -> None:
        partial = self.partial_lines.get(path)
        if partial is not None and partial[0] <= last_lineno:
            del self.partial_lines[path]  # its newline came: the line is in the ring

    def _keep_chunk(self, path: str, text: str, first_lineno: int, count: int) -> None:
        """A chunk of ``count`` complete lines (counted in C by the caller):
        only the last ``keep_lines`` of them are split off, and not before a
        view asks when the chunk alone fills the ring."""
        if self.partial_lines and count:
            self._drop_partial(path, first_lineno + count - 1)
        if self.keep_lines and count >= self.keep_lines:
            self._unsplit[path] = (text, first_lineno, count)
        elif self.keep_lines and count:
            self.remember_lines(path, (text[:-1] if text.endswith("\n") else text).split("\n"), first_lineno)

    def _split_pending(self, path: str) -> None:
        pending = self._unsplit.pop(path, None)
        if pending is None:
            return
        text, first_lineno, count = pending
        tail = text[:-1] if text.endswith("\n") else text
        lines = tail.rsplit("\n", self.keep_lines)[-self.keep_lines :]
        self.remember_lines(path, lines, first_lineno + count - len(lines))

    def remember_lines(self, path: str, lines: list[str], first_lineno: int) -> None:
        self._split_pending(path)
        if self.partial_lines and lines:
            self._drop_partial(path, first_lineno + len(lines) - 1)
        ring = self._lines.get(path)
        if ring is None:
            ring = self._lines[path] = deque(maxlen=self.keep_lines)
        elif ring and ring[-1][0] >= first_lineno:
            # The file's lines are counted from 1 again (truncated, made
            # anew, rotated: ``Renumbered``): the old file's lines would
            # stand among the new ones under the same numbers, and a jump
            # to an alert's line 9 would land on the old line 9.
            ring.clear()
            self.line_restarts[path] = self.line_restarts.get(path, 0) + 1
        if len(lines) > self.keep_lines:
            first_lineno += len(lines) - self.keep_lines
            lines = lines[-self.keep_lines :]
        if lines and max(map(len, lines)) > VIEW_LINE_MAX:
            lines = [_shortened(line) for line in lines]
        if not any("\r" in line for line in lines):  # the common case, at C speed
            ring.extend(zip(range(first_lineno, first_lineno + len(lines)), lines))
            return
        for lineno, line in enumerate(lines, first_lineno):
            # A tqdm line redrawn with '\r' shows its last state, as a terminal would.
            if "\r" in line:
                line = line.rstrip("\r").rsplit("\r", 1)[-1]
            ring.append((lineno, line))
