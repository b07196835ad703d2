"""Where in a chunk are the lines that hold any of a set of literals?

The stream's first step on every chunk, and most of its cost on a quiet
log: the literals (progress words, the crash assembler's triggers) must be
found in megabytes of text of which a few percent matter. Two engines give
the same answer, the sorted end offsets of the lines that hold a literal:

* ``HyperscanScanner``: Intel's Hyperscan (the ``hyperscan`` package) runs
  one automaton for all literals over the chunk's bytes, several times
  faster than any use of ``re``. A chunk that is not ASCII (tqdm's block
  bars) is scanned with its other characters as '?', so that byte offsets
  stay character offsets.
* ``RegexScanner``: the standard library only, used where Hyperscan is not
  installed (it has no wheels for some platforms).

``make_scanner`` picks the best one available.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from .native import KERNELS

# Rough frequency (per mille) of characters in training logs, measured on the
# real-world corpus. Characters not listed count as rare.
_FREQ: dict[str, float] = {
    " ": 172, "0": 46, "1": 41, ":": 36, "t": 34, "2": 33, "e": 31, "s": 31, "a": 29,
    "4": 24, "r": 24, "n": 23, "/": 23, ".": 23, "3": 22, "5": 22, "i": 21, "o": 20,
    "6": 19, "|": 18, "8": 17, "7": 17, "9": 17, "m": 16, "d": 15, "l": 14, "p": 13,
    "c": 13, "-": 11, ",": 11, "h": 10, "[": 9, "u": 8, "]": 8, "g": 8, "f": 7, "%": 6,
    "_": 5, "C": 5, "k": 5, "N": 4, "<": 4, "b": 4, "P": 4, "(": 4, "I": 3, ")": 3,
    "w": 3, "y": 3, "'": 3, "v": 3, "F": 3, "O": 2, "L": 2, "=": 2,
}


def _anchor_cost(char: str, freq: dict[str, float]) -> float:
    # One regex pass costs about as much as a plain loop over the chunk,
    # plus a match attempt at every occurrence of its anchor character.
    return 1.0 + freq.get(char, 1) / 15.0


def measured_frequencies(literals: Sequence[str], sample: str) -> dict[str, float]:
    """Per-mille frequency in ``sample`` of each character of ``literals``.

    A log's own text beats the corpus table: a logger that prints paths
    all day makes ``/`` and ``p`` common, one that does not leaves them rare.
    """
    n = max(len(sample), 1)
    return {c: 1000.0 * sample.count(c) / n for c in {c for lit in literals for c in lit}}


def build_scanner(literals: Sequence[str], freq: dict[str, float] | None = None) -> tuple[re.Pattern[str], ...]:
    """Regexes that together find every occurrence of every literal.

    ``str.find`` per literal costs a pass over the chunk per literal, and an
    alternation of literals in one regex is slower still (``re`` tries every
    alternative at every position). But a regex that starts with one
    literal character runs a tight C loop to the next occurrence of that
    character. So each literal is anchored on one of its characters,
    ``(?<=...)`` checks the part before it, and literals sharing an anchor
    share a pass: a greedy set cover picks few, rare anchors. ``freq``
    (per mille) says how rare; by default the corpus table ``_FREQ``.
    """
    freq = _FREQ if freq is None else freq
    todo = set(_usable(literals))
    patterns = []
    while todo:
        chars = {c for lit in todo for c in lit}
        anchor = max(
            sorted(chars),
            key=lambda c: (sum(1 for lit in todo if c in lit) / _anchor_cost(c, freq), -freq.get(c, 1)),
        )
        mine = sorted(lit for lit in todo if anchor in lit)
        todo -= set(mine)
        alternatives = []
        for lit in mine:
            j = lit.index(anchor)
            behind = f"(?<={re.escape(lit)})" if j > 0 else ""
            alternatives.append(re.escape(lit[j + 1:]) + behind)
        # Alternatives that start with a literal character are rejected by
        # ``re`` with one comparison; put the others last.
        alternatives.sort(key=lambda alt: alt.startswith("(?<="))
        # The tail runs the match to the end of the line: one hit per line
        # and pattern, and the hit's end is the line's end, with no
        # per-hit ``find`` in Python.
        patterns.append(re.compile(re.escape(anchor) + "(?:" + "|".join(alternatives) + ")[^\n]*"))
    return tuple(patterns)


def _usable(literals: Sequence[str]) -> tuple[str, ...]:
    """The literals a line can hold: not empty, no newline."""
    return tuple(sorted({lit for lit in literals if lit and "\n" not in lit}))


class Scanner(Protocol):
    def ends(self, text: str) -> list[int]:
        """Sorted end offsets (the ``'\\n'``, or ``len(text)``) of the lines
        of ``text`` that hold any literal, each once."""
        ...

    def tune(self, sample: str) -> None:
        """Learn from a stretch of the log's own text (a first chunk)."""
        ...


class RegexScanner:
    """``build_scanner``'s regexes, anchors tuned to the log once."""

    def __init__(self, literals: Sequence[str]) -> None:
        self.literals = _usable(literals)
        self._patterns = build_scanner(self.literals)

    def tune(self, sample: str) -> None:
        # Any anchors find the same lines; rare ones find them faster.
        self._patterns = build_scanner(self.literals, measured_frequencies(self.literals, sample))

    def ends(self, text: str) -> list[int]:
        if len(self._patterns) == 1:
            return [m.end() for m in self._patterns[0].finditer(text)]
        ends: set[int] = set()
        for pattern in self._patterns:
            ends.update([m.end() for m in pattern.finditer(text)])
        return sorted(ends)


class HyperscanScanner:
    """One Hyperscan automaton over the chunk's bytes.

    The expression is ``(?:lit1|lit2|...)[^\\n]*\\n``: its matches end at
    the newline of each line that holds a literal, and Hyperscan reports an
    end offset once however many literals the line holds, so there is one
    Python callback per candidate line, not per literal occurrence.
    """

    def __init__(self, literals: Sequence[str], hyperscan: object) -> None:
        self.literals = _usable(literals)
        self._placeholder_safe = not any("?" in lit for lit in self.literals)
        self._db = self._scratch = None
        if self.literals:
            self._db = _compiled(self.literals, hyperscan)
            # A database may be shared; scratch space may not (one per scan
            # in flight), and it costs microseconds, not a compile.
            self._scratch = hyperscan.Scratch(database=self._db)  # type: ignore[attr-defined]

    def tune(self, sample: str) -> None:
        pass  # one automaton: no anchors to choose

    def ends(self, text: str) -> list[int]:
        if self._db is None:
            return []
        if text.isascii():
            # The str's own bytes where the kernels are (no copy of the chunk), else a copy.
            data = text.encode("ascii") if KERNELS is None or type(text) is not str else KERNELS.ascii_bytes(text)
        elif self._placeholder_safe:
            # Each other character becomes one '?': offsets stay character
            # offsets, and no literal (none holds a '?') can match where it
            # could not match before.
            data = text.encode("ascii", "replace")
        else:
            return self._wide_ends(text)
        return self._scan(data)

    def _scan(self, data: bytes | memoryview) -> list[int]:
        if data[-1:] != b"\n":
            data = bytes(data) + b"\n"  # the last line ends at len(text), as the regexes say
        ends: list[int] = []
        if KERNELS is not None:  # the handler in C (``match_end``), the list its context
            self._db.scan(  # type: ignore[attr-defined]
                data, match_event_handler=KERNELS.match_end, scratch=self._scratch, context=ends
            )
            return ends
        append = ends.append

        def on_match(_id: int, _start: int, end: int, _flags: int, _context: object) -> None:
            append(end - 1)

        self._db.scan(data, match_event_handler=on_match, scratch=self._scratch)  # type: ignore[attr-defined]
        return ends

    def _wide_ends(self, text: str) -> list[int]:
        """The UTF-8 bytes, and byte offsets turned into character offsets
        (each slice between two newlines is whole characters)."""
        # surrogatepass: any str encodes, and each slice decodes back to
        # exactly its characters.
        data = text.encode("utf-8", "surrogatepass")
        out = []
        chars = prev = 0
        for end in self._scan(data):
            chars += len(data[prev:end].decode("utf-8", "surrogatepass"))
            prev = end
            out.append(chars)
        return out


# Compiled databases by literal set: a compile takes ~10 ms, and a watch of
# 64 per-rank logs (or a relaunch, which starts every stream anew) would pay
# it per file.
_DATABASES: dict[tuple[str, ...], object] = {}
_DATABASES_MAX = 16


class DatabaseStore(Protocol):
    """Where compiled databases outlive the process (the shell's
    ``code_cache``, beside the bytecode): the core keeps no file itself."""

    def database(self, key: str) -> bytes | None:
        """The serialized database kept under ``key``, if any."""
        ...

    def keep_database(self, key: str, blob: bytes) -> None:
        """Keep ``blob`` (``hyperscan.dumpb``) under ``key``."""
        ...


_STORE: DatabaseStore | None = None


def keep_databases(store: DatabaseStore | None) -> None:
    """Read compiled databases from ``store`` and give it each one compiled
    (None: compile in each process). A start reads its ~50 KB database in
    microseconds instead of compiling it (~10 ms, a tenth of a command's
    start-up)."""
    global _STORE
    _STORE = store


def _compiled(literals: tuple[str, ...], hyperscan: object) -> object:
    db = _DATABASES.get(literals)
    if db is None:
        alternation = b"|".join(re.escape(lit).encode("ascii") for lit in literals)
        expression = b"(?:" + alternation + b")[^\\n]*\\n"
        # The library's version in the key: its serialized form is its own.
        key = f"hyperscan {getattr(hyperscan, '__version__', '?')} {expression.decode('ascii')}"
        db = _stored(key, hyperscan)
        if db is None:
            db = hyperscan.Database()  # type: ignore[attr-defined]
            db.compile(expressions=[expression], ids=[0], flags=[0])
            if _STORE is not None:
                _STORE.keep_database(key, hyperscan.dumpb(db))  # type: ignore[attr-defined]
        if len(_DATABASES) >= _DATABASES_MAX:
            _DATABASES.clear()
        _DATABASES[literals] = db
    return db


def _stored(key: str, hyperscan: object) -> object | None:
    """The store's database of ``key``, checked by one scan: a blob that
    does not load, or a database built for another CPU (a cache on a shared
    disk), fails here, not mid-run; None then, and it is compiled anew."""
    blob = None if _STORE is None else _STORE.database(key)
    if blob is None:
        return None
    try:
        db: object = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)  # type: ignore[attr-defined]
        db.scan(b"\n", scratch=hyperscan.Scratch(database=db))  # type: ignore[attr-defined]
    except (hyperscan.error, TypeError, ValueError):  # type: ignore[attr-defined]
        return None
    return db


def make_scanner(literals: Sequence[str], *, engine: str = "auto") -> Scanner:
    """``engine``: "hyperscan", "re", or "auto" (Hyperscan where installed,
    every literal is ASCII and it compiles them; else ``re``)."""
    if engine not in ("auto", "hyperscan", "re"):
        raise ValueError(f"unknown scanner engine {engine!r} (auto, hyperscan, re)")
    if engine == "re":
        return RegexScanner(literals)
    if not all(lit.isascii() for lit in literals):
        if engine == "hyperscan":
            raise ValueError("the Hyperscan scanner needs ASCII literals")
        return RegexScanner(literals)
    try:
        import hyperscan
    except ImportError:
        if engine == "hyperscan":
            raise
        return RegexScanner(literals)
    try:
        return HyperscanScanner(literals, hyperscan)
    except hyperscan.error:
        # A literal it cannot take (a NUL ends its C string), a CPU it does
        # not support: the standard library finds the same lines.
        if engine == "hyperscan":
            raise
        return RegexScanner(literals)
