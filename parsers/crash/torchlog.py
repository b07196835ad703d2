"""torch.compile's own log lines about recompiling.

Dynamo says two things worth an alert, each over several lines that all
carry the same logger prefix (glog ``W0531 18:55:20.328000 627698
torch/_dynamo/convert_frame.py:1743] [1/8]`` since torch 2.2, Python logging
``[2023-...] torch._dynamo.convert_frame: [WARNING]`` before):

- the recompile limit was hit (``torch._dynamo hit config.recompile_limit
  (8)``, ``cache_size_limit`` before torch 2.6), then ``function:`` and
  ``last reason:`` lines: the function now runs uncompiled, a silent slow-down;
- with ``TORCH_LOGS=recompiles``, every recompilation (``Recompiling function
  forward in x.py:12``, ``triggered by the following guard failure(s):``,
  ``- 0/0: L['x'].size()[0] == 3``).

The block is assembled here; parsers/tracebacks.py routes lines to it, so
rank prefixes are already stripped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..events import Recompile

# Logger prefixes in front of a dynamo message, and dynamo's frame id
# ``[1/8]`` (frame 1, compile 8) and artifact tag ``[__recompiles]``.
_GLOG = re.compile(r"^[IWEFVD]\d{3,4} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s+\d+\s+\S+:\d+\]\s?")
_PYLOG = re.compile(r"^\[\d{4}-\d{2}-\d{2}[ T][\d:.,]+\]\s+[\w.]+:\s+\[[A-Z]+\]\s?")
_FRAME_ID = re.compile(r"^\[\d+/\d+(?:_\d+)?\]\s?")
_TAG = re.compile(r"^\[__\w+\]\s?")

_HIT = re.compile(
    r"torch\._dynamo hit config\.((?:accumulated_)?(?:recompile_limit|cache_size_limit)) \((\d+)\)"
)
_RECOMPILING = re.compile(r"Recompiling function (\S+)(?: in (\S+))?")
_FUNCTION = re.compile(r"function:\s*'([^']+)'")
_REASON = re.compile(r"(?:last reason|reasons?):\s*(.*)$")
_GUARD = re.compile(r"^\s*-\s+(.*)$")
_GUARD_ID = re.compile(r"^\d+/\d+:\s*")
_COMMENT = re.compile(r"\s+#\s.*$")
_FAIL = re.compile(r"FailOnRecompileLimitHit\b")

# Tail lines of the limit warning; the second is its last line.
_LIMIT_TAIL = ("To log all recompilation reasons", "To diagnose recompilation issues")

TRIGGERS: tuple[str, ...] = (
    "recompile_limit", "cache_size_limit", "Recompiling function", "FailOnRecompileLimitHit",
)


def strip_logger(text: str) -> tuple[str, bool]:
    """Remove a glog/logging prefix, a ``[1/8]`` frame id and a ``[__tag]``.

    Returns the message and whether a logger prefix was there: a
    continuation line of a block carries the same kind of prefix.
    """
    had_prefix = False
    match = _GLOG.match(text) or _PYLOG.match(text)
    if match is not None:
        text = text[match.end():]
        had_prefix = True
    match = _FRAME_ID.match(text)
    if match is not None:
        text = text[match.end():]
        had_prefix = True
    match = _TAG.match(text)
    if match is not None:
        text = text[match.end():]
    return text, had_prefix


def clean_reason(text: str) -> str:
    """``1/7: kv_cache.pos == 10   # comment`` -> ``kv_cache.pos == 10``."""
    text = _GUARD_ID.sub("", text.strip())
    return _COMMENT.sub("", text).strip()


def is_fail_on_limit(text: str) -> bool:
    return _FAIL.search(text) is not None


@dataclass(slots=True)
class RecompileBlock:
    """One multi-line dynamo message being read; mutable while it is open."""

    time: float
    source: str
    rank: int | None
    hit_limit: bool
    function: str | None = None
    reason: str | None = None
    limit: int | None = None
    finished: bool = False

    @classmethod
    def start(cls, text: str, source: str, time: float, rank: int | None) -> RecompileBlock | None:
        """A block begins on this (rank-stripped) line, or None."""
        message, _ = strip_logger(text)
        hit = _HIT.search(message)
        if hit is not None:
            return cls(time=time, source=source, rank=rank, hit_limit=True, limit=int(hit.group(2)))
        recompiling = _RECOMPILING.search(message)
        if recompiling is not None:
            return cls(time=time, source=source, rank=rank, hit_limit=False, function=recompiling.group(1))
        return None

    def feed(self, text: str) -> bool:
        """Take a continuation line; False when the line is not part of the block."""
        if self.finished:
            return False
        message, had_prefix = strip_logger(text)
        body = message.strip()
        if not body:
            return False
        if self.hit_limit:
            if body.startswith("function:"):
                match = _FUNCTION.search(body)
                if match is not None:
                    self.function = match.group(1)
                return True
            if body.startswith(("last reason:", "reasons:", "reason:")):
                match = _REASON.search(body)
                if match is not None:
                    self.reason = clean_reason(match.group(1)) or None
                return True
            if body.startswith(_LIMIT_TAIL):
                if body.startswith(_LIMIT_TAIL[1]):
                    self.finished = True
                return True
            return False
        # TORCH_LOGS=recompiles: indented continuation lines, or lines of the
        # same logger ("triggered by...", "- 0/0: guard").
        if not (message[:1].isspace() or had_prefix):
            return False
        if body.startswith("triggered by"):
            return True
        guard = _GUARD.match(body)
        if guard is not None:
            if self.reason is None:
                self.reason = clean_reason(guard.group(1)) or None
            return True
        if body.startswith("guard ") and body.rstrip().endswith(":"):
            return True  # recompiles_verbose: "guard 0 failures:"
        return False

    def event(self) -> Recompile:
        return Recompile(
            time=self.time,
            source=self.source,
            function=self.function,
            reason=self.reason,
            limit=self.limit,
            hit_limit=self.hit_limit,
            fatal=False,
            rank=self.rank,
        )


def fatal_recompile(
    time: float, source: str, rank: int | None, last: Recompile | None
) -> Recompile:
    """``FailOnRecompileLimitHit``: the limit hit is now an error.

    The exception's text does not name the function; the limit warning that
    dynamo logs just before it (same rank) does, so its details carry over.
    """
    return Recompile(
        time=time,
        source=source,
        function=last.function if last is not None else None,
        reason=last.reason if last is not None else None,
        limit=last.limit if last is not None else None,
        hit_limit=True,
        fatal=True,
        rank=rank,
    )
