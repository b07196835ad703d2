"""Whether a file given as a log (or a GPU sample or probe file) holds text.

A command that reads a finished file (``replay``, ``check``, ``baseline
save``/``diff``) is given the wrong path now and then: a checkpoint, a
core dump, ``/dev/urandom`` saved to a file. Read as a log it gives no
line and no alert, and the command says "healthy" or prints nothing with
exit 0, which reads as a clean run. Such a file is refused with one line
instead (``replay.check_inputs``).
"""

from __future__ import annotations

# How much of a log's beginning is judged as text or not, and the share of
# it that may be neither UTF-8 nor printable (a Latin-1 name, a stray byte
# of a torn write) before it is not a log at all.
TEXT_SAMPLE_BYTES = 64 * 1024
MAX_NON_TEXT_SHARE = 0.30
# Control characters a log does hold: tab, newlines, CR redraws of a
# progress bar, backspace, form feed, ANSI colour escapes.
_TEXT_CONTROLS = frozenset(b"\t\n\r\x08\x0c\x1b")
# Files that are plainly not text by their first bytes, whatever share of
# their bytes is printable (a small program's symbol names, a compressed
# log's header): (magic, what it is, what to do).
_MAGICS = (
    (b"\x1f\x8b", "a gzip file", "decompress it first (gunzip, or zcat into a file)"),
    (b"BZh", "a bzip2 file", "decompress it first (bunzip2)"),
    (b"\xfd7zXZ\x00", "an xz file", "decompress it first (unxz)"),
    (b"\x28\xb5\x2f\xfd", "a zstd file", "decompress it first (unzstd)"),
    (b"PK\x03\x04", "a zip archive (a torch checkpoint is one)", "give the log itself"),
    (b"\x7fELF", "a program (ELF)", "give the log it writes"),
)


def not_text(path: str) -> str | None:
    """Why ``path`` is not a text log (random bytes, a binary), or None.

    Judged on its first 64 KiB of non-NUL bytes: NULs alone are no proof,
    since a log truncated under a writer without O_APPEND (logrotate's
    copytruncate) starts with a hole of them. The rest must be mostly
    UTF-8 and printable; a checkpoint or ``/dev/urandom`` is not (about
    half of random bytes are neither), and reading it as a log would say
    "healthy" about nothing.
    """
    try:
        with open(path, "rb") as f:
            first = f.read(TEXT_SAMPLE_BYTES)
            for magic, what, todo in _MAGICS:
                if first.startswith(magic):
                    return f"{what}: {todo}"
            sample = bytearray(first.replace(b"\0", b""))
            budget = 255 * TEXT_SAMPLE_BYTES  # 16 MiB read at most: a longer hole is not judged, the log is read
            while len(sample) < TEXT_SAMPLE_BYTES and budget > 0:
                budget -= TEXT_SAMPLE_BYTES
                block = f.read(TEXT_SAMPLE_BYTES)
                if not block:
                    break
                sample += block.replace(b"\0", b"")
    except OSError:
        return None  # the reader says why, in its words
    sample = sample[:TEXT_SAMPLE_BYTES]
    if not sample:
        return None
    text = bytes(sample).decode("utf-8", errors="replace")
    bad = text.count("\ufffd") + sum(1 for c in text if ord(c) < 32 and ord(c) not in _TEXT_CONTROLS)
    share = bad / max(len(text), 1)
    if share > MAX_NON_TEXT_SHARE:
        return f"{share:.0%} of its first {len(sample) // 1024 or 1} KiB is neither UTF-8 nor printable"
    return None
