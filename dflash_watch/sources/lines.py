"""Bytes to decoded runs of complete lines, bounded in memory.

One splitter per followed file (and one per replayed file): bytes are split
at the last ``b'\\n'`` of each read and decoded once per chunk, never per
line, since most lines of a training log say nothing and a per-line loop
here would cost more than the rest of the pipeline together. A line longer
than the limit keeps only its head, so a 2 GB line without a newline (a
tqdm bar over a whole epoch, a binary file by mistake) cannot eat memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..parsers.native import KERNELS

MiB = 1 << 20


def newline_count(data: bytes | bytearray) -> int:
    """``data.count(b"\\n")``: in C, newline to newline, where the kernels
    are built (``parsers.native``); CPython's count looks at every byte,
    and every byte of a replayed or caught-up log is counted once."""
    return data.count(b"\n") if KERNELS is None else KERNELS.newlines(data)


def decoded(data: bytes | bytearray) -> str:
    """``str(data, "utf-8", "replace")``. In C where the kernels are built
    (``parsers.native``) and the bytes are ASCII, or valid UTF-8 within the
    Basic Multilingual Plane: a chunk with one tqdm block bar (U+2588) took
    CPython's decoder 1.0 ms a MiB, the kernel 0.47. Any other chunk (an
    invalid byte, an emoji) is Python's to decode, replacements and all."""
    if KERNELS is not None:
        text = KERNELS.utf8_text(data)
        if text is not None:
            return text
    return str(data, "utf-8", "replace")


def fmt_size(n: int) -> str:
    if n >= MiB:
        value, unit = n / MiB, "MiB"
    elif n >= 1024:
        value, unit = n / 1024, "KiB"
    else:
        return f"{n} B"
    text = f"{value:.1f}"
    return f"{text[:-2] if text.endswith('.0') else text} {unit}"



def _trim_utf8(head: bytes) -> bytes:
    """Drop a multi-byte character cut in half at the end, so a cut line ends cleanly."""
    end = len(head)
    back = 0
    while back < 3 and end - back > 0 and (head[end - back - 1] & 0xC0) == 0x80:
        back += 1
    if end - back > 0:
        lead = head[end - back - 1]
        need = 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if lead >= 0xF0 else 1
        if back + 1 < need:
            return head[: end - back - 1]
    return head



# What ``LineSplitter.feed`` and ``finish`` give: the complete lines' text,
# the number of its first line, the lines cut (number, length) and how many
# lines the text holds.
Split = tuple[str, int, list[tuple[int, int]], int]


class LineSplitter:
    """Turns a byte stream into decoded runs of complete lines, bounded in memory.

    A partial last line is kept as bytes (so a UTF-8 character split across
    writes decodes whole).  A line longer than ``max_line`` keeps only its
    head; the rest is counted and dropped until its newline arrives (with
    ``keep_states``, a line redrawn with '\\r' sets its states aside instead).
    """

    __slots__ = (
        "max_line", "lineno", "pending", "cut_head", "cut_dropped", "tail", "tail_new", "tail_fresh",
        "tail_cut", "states",
    )

    # How much of an unfinished line's end is kept for its redraws: every
    # state drawn between two polls must fit (a bar with a long postfix
    # redrawn 100 times a second, polled every 0.5 s, draws ~10 KiB).
    TAIL = 64 * 1024

    def __init__(self, max_line: int, lineno: int = 1, *, keep_states: bool = False) -> None:
        self.max_line = max_line
        self.lineno = lineno
        self.pending = bytearray()
        self.cut_head: bytes | None = None
        self.cut_dropped = 0
        # The last bytes of the unfinished line, kept even when the line is
        # cut (an epoch-long tqdm line passes 1 MiB; its newest state is at
        # its end), whether they changed since latest_redraw() last ran, how
        # many of them came since then, and whether their head was dropped.
        self.tail = b""
        self.tail_new = False
        self.tail_fresh = 0
        self.tail_cut = False
        # ``keep_states`` (replay): an unfinished line redrawn with '\\r' is
        # not cut at ``max_line``: its complete states move here instead
        # (``take_states``), so that every state of an epoch-long bar is read.
        self.states: list[bytes] | None = [] if keep_states else None

    def latest_redraw(self) -> str | None:
        """Every ``'\\r'``-separated state of the unfinished line drawn since
        the last call, oldest first and ``'\\r'``-joined, once per change.

        Not only the newest one: a bar's states between two polls are each
        a reading of the run's rate (a drop shows in them, live, as it does
        in replay). A state still being written at the last call comes again
        whole; a state whose start fell out of the kept tail is left out.
        """
        # A '\r' at the very end is a CRLF line whose '\n' is still to come
        # (a burst cut between them): that line is not a redraw.
        tail = self.tail[:-1] if self.tail.endswith(b"\r") else self.tail
        if not self.tail_new or b"\r" not in tail:
            return None
        self.tail_new = False
        new_from = len(self.tail) - self.tail_fresh
        self.tail_fresh = 0
        parts: list[bytes] = []
        pos = 0
        split = tail.split(b"\r")
        for i, part in enumerate(split):
            end = pos + len(part)
            # New: its last byte came since the last call (not a head cut off).
            if end > new_from and part.strip() and not (i == 0 and self.tail_cut):
                if i and split[i - 1] and not split[i - 1].strip():
                    # tqdm's clear before it (blanks): it may be a log record
                    # still being written after the bar, not a state of it;
                    # the reader tells them apart by it (``parsers/glued.py``).
                    parts.append(split[i - 1])
                parts.append(part)
            pos = end + 1
        if not parts:
            return None
        return decoded(b"\r".join(parts))

    def take_states(self) -> list[bytes]:
        """The complete states of a long redrawn line set aside since the
        last call (``keep_states``), oldest first; each block is a run of
        ``'\\r'``-separated states of the line numbered ``lineno``."""
        states = self.states
        if not states:
            return []
        self.states = []
        return states

    @property
    def buffered(self) -> int:
        return len(self.pending) + (len(self.cut_head) if self.cut_head is not None else 0)

    def feed(self, data: bytes) -> Split | None:
        """Returns (text, first_lineno, [(lineno, full_length) of cut lines]) or None."""
        out: list[bytes | bytearray] = []  # pending + body stays a bytearray: no extra copy
        cuts: list[tuple[int, int]] = []
        if self.states is not None:
            data = self._states_aside(data)
            if not data:
                return None
        if self.cut_head is not None:
            nl = data.find(b"\n")
            if nl < 0:
                self.cut_dropped += len(data)
                self._keep_tail(data)
                return None
            self.cut_dropped += nl
            out.append(self._finish_cut(self.lineno, cuts))
            data = data[nl + 1 :]
        last = data.rfind(b"\n")
        if last < 0:
            self._hold(data)
            return self._result(out, cuts)
        first_nl = data.find(b"\n")
        pending = self.pending
        if len(pending) + first_nl <= self.max_line and last - first_nl <= self.max_line:
            # No line can be over-long: the common case, no per-line work.
            # The complete lines copied once: onto the pending line's start,
            # else sliced off (not at all where the data ends a line).
            if pending:
                pending += memoryview(data)[: last + 1]
                out.append(pending)
            else:
                out.append(data if last + 1 == len(data) else data[: last + 1])
        else:
            out.extend(self._split_long(bytes(pending) + data[: last + 1], self.lineno + len(out), cuts))
        self.pending = bytearray()
        self._hold(data[last + 1 :])
        return self._result(out, cuts)

    def finish(self) -> Split | None:
        """Ends the stream: a last line without its newline is emitted with one."""
        cuts: list[tuple[int, int]] = []
        out: list[bytes] = []
        if self.cut_head is not None:
            out.append(self._finish_cut(self.lineno, cuts))
        elif self.pending:
            out.append(bytes(self.pending) + b"\n")
            self.pending = bytearray()
        return self._result(out, cuts)

    def _states_aside(self, data: bytes) -> bytes:
        """``keep_states``: the unfinished line, with ``data`` up to its
        newline, would pass ``max_line``: its complete states go aside
        (``take_states``), its last one stays pending; the rest of ``data``."""
        nl = data.find(b"\n")
        head = len(data) if nl < 0 else nl
        if self.cut_head is not None or len(self.pending) + head <= self.max_line:
            return data
        seg = bytes(self.pending) + data[:head]
        cr = seg.rfind(b"\r")
        if cr <= 0:
            return data
        self.states.append(seg[:cr])  # type: ignore[union-attr]
        self.pending = bytearray(seg[cr:])
        self._keep_tail(data[:head])
        return data[head:]

    def _keep_tail(self, data: bytes, fresh: bool = False) -> None:
        whole = data if fresh else self.tail + data
        self.tail_cut = (len(whole) > self.TAIL) or (self.tail_cut and not fresh)
        self.tail = whole[-self.TAIL :]
        self.tail_fresh = min(len(self.tail), (0 if fresh else self.tail_fresh) + len(data))
        self.tail_new = True

    def _hold(self, rest: bytes) -> None:
        if not rest:
            if self.tail:
                self.tail, self.tail_new, self.tail_fresh, self.tail_cut = b"", False, 0, False
            return
        self._keep_tail(rest, fresh=not self.pending)
        self.pending += rest
        if len(self.pending) > self.max_line and self.states is not None:
            # Replay: a bar redrawn for a whole epoch is read state by state,
            # never cut; only its unfinished last state stays pending.
            cr = self.pending.rfind(b"\r")
            if cr > 0:
                self.states.append(bytes(self.pending[:cr]))
                del self.pending[:cr]
        if len(self.pending) > self.max_line:
            self.cut_head = _trim_utf8(bytes(self.pending[: self.max_line]))
            self.cut_dropped = len(self.pending) - len(self.cut_head)
            self.pending = bytearray()

    def _finish_cut(self, lineno: int, cuts: list[tuple[int, int]]) -> bytes:
        head = self.cut_head or b""
        cuts.append((lineno, len(head) + self.cut_dropped))
        line = head + f" …[cut {fmt_size(self.cut_dropped)}]\n".encode()
        self.cut_head = None
        self.cut_dropped = 0
        return line

    def _split_long(self, buf: bytes, lineno: int, cuts: list[tuple[int, int]]) -> list[bytes]:
        res: list[bytes] = []
        seg = start = 0
        n = len(buf)
        while start < n:
            nl = buf.find(b"\n", start)
            if nl - start > self.max_line:
                if seg < start:
                    res.append(buf[seg:start])
                head = _trim_utf8(buf[start : start + self.max_line])
                dropped = nl - start - len(head)
                cuts.append((lineno, nl - start))
                res.append(head + f" …[cut {fmt_size(dropped)}]\n".encode())
                seg = nl + 1
            start = nl + 1
            lineno += 1
        if seg < n:
            res.append(buf[seg:])
        return res

    def _result(
        self, out: Sequence[bytes | bytearray], cuts: list[tuple[int, int]]
    ) -> Split | None:
        if not out:
            return None
        joined = out[0] if len(out) == 1 else b"".join(out)
        first = self.lineno
        # Counted here, on the bytes, once: the reader of the text need not
        # count it again (a str with one tqdm block character is two bytes a
        # character, and slower to count).
        count = newline_count(joined)
        self.lineno += count
        return decoded(joined), first, cuts, count
