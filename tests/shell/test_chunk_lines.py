"""``Chunk.lines``: the lines a chunk holds, counted once on the bytes by
the splitter that cut them, so that the Monitor need not count the decoded
text again (``Ingest.feed_text``'s ``lines``). It must be what counting the
text gives, whatever the bytes: cut over-long lines, CRLF, redraws with
'\\r', bytes that are not UTF-8, a last line without its newline."""

from __future__ import annotations

from pathlib import Path

from dflash_watch.sources.chunks import Chunk, read_chunks
from dflash_watch.sources.logtail import LogTailer

ODD = [
    b"plain line\n",
    b"crlf line\r\n",
    b"Training:  10%|\xe2\x96\x88         | 1/10\rTraining:  20%|\xe2\x96\x88\xe2\x96\x88        | 2/10\n",
    b"not utf-8 \xff\xfe here\n",
    b"x" * 3000 + b"\n",  # cut at max_line_bytes
    b"\n",
    b"last without newline",
]


def _check(chunks: list[Chunk]) -> int:
    total = 0
    for c in chunks:
        assert c.lines == c.text.count("\n"), (c.lines, c.text[:80])
        total += c.lines
    return total


def _drain(t: LogTailer) -> list[Chunk | object]:
    """Every item the tailer has now (a poll reads a chunk of each file)."""
    items: list[Chunk | object] = []
    while more := t.poll():
        items += more
    return items


def test_read_chunks_count_what_they_hold(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(ODD * 50))
    chunks = [c for c in read_chunks(str(log), chunk_bytes=997, max_line_bytes=1024) if isinstance(c, Chunk)]
    assert len(chunks) > 10
    # Each copy's last line runs into the next copy's first; the file's
    # last gets its newline.
    assert _check(chunks) == len(ODD) * 50 - 49


def test_the_tailer_counts_what_it_hands_on(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(ODD[:-1] * 20))
    with LogTailer([str(log)], use_watchdog=False, chunk_bytes=997, max_line_bytes=1024) as t:
        items = _drain(t)
        with log.open("ab") as fh:
            fh.write(b"".join(ODD[:-1] * 3))
        items += _drain(t)
    chunks = [c for c in items if isinstance(c, Chunk) and not c.partial]
    assert len(chunks) >= 2
    assert _check(chunks) == (len(ODD) - 1) * 23
