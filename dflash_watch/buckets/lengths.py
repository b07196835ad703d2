"""Reading sample lengths from a file: .npy, .txt, .jsonl, .pt.

Every reader returns a 1-D int64 numpy array of non-negative lengths or
raises ``LengthsError`` with a one-line reason naming the file (and the
line, where there is one). What is read is data: nothing in it is executed
(``np.load`` without pickles, ``torch.load(weights_only=True)``).

The ``.txt`` reader is the hot path (the benchmark's 1.1M lengths): one
numpy pass checks that every byte is a digit or whitespace, then numpy's C
text parser reads the whole file (~30 ms for 1.1M lengths). Otherwise a line
loop decides: it accepts whole-number floats (``12.0``) and names the first
bad line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

# Fields a .jsonl line may carry its length in, in the order they are tried.
JSONL_FIELDS = ("length", "len", "num_tokens", "seq_len", "input_ids")
FORMATS = (".npy", ".txt", ".jsonl", ".pt")


class LengthsError(ValueError):
    """A lengths file that cannot be used; the message is one line."""


def read_lengths(path: str | Path, field: str | None = None) -> np.ndarray:
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in FORMATS:
        raise LengthsError(f"{_show(p)}: unknown lengths format {suffix or '(no suffix)'!r}: "
                           f"use {', '.join(FORMATS)}")
    if field is not None and suffix != ".jsonl":
        raise LengthsError(f"--field applies to .jsonl files, not {suffix}")
    try:
        if p.is_dir():
            raise LengthsError(f"{_show(p)}: is a directory")
        if suffix == ".txt":
            out = _from_text(p.read_bytes(), p)
        elif suffix == ".jsonl":
            out = _from_jsonl(p, field)
        elif suffix == ".npy":
            out = _from_npy(p)
        else:
            out = _from_pt(p)
    except FileNotFoundError:
        raise LengthsError(f"{_show(p)}: no such file") from None
    except PermissionError:
        raise LengthsError(f"{_show(p)}: permission denied") from None
    except IsADirectoryError:
        raise LengthsError(f"{_show(p)}: is a directory") from None
    if out.size == 0:
        raise LengthsError(f"{_show(p)}: no lengths in the file")
    return out


def _show(p: Path) -> str:
    """The path as text that cannot drive the terminal (escapes, newlines)."""
    s = str(p)
    return s if s.isprintable() else ascii(s)


# --- .txt -----------------------------------------------------------------

def _from_text(raw: bytes, p: Path) -> np.ndarray:
    """Whitespace-separated whole numbers, one per line.

    When every byte is a digit or whitespace, numpy's C parser reads the
    lot; the number of digit runs must then match what it read and nothing
    may be near int64's top (it clamps there), else the line loop decides.
    """
    b = np.frombuffer(raw, dtype=np.uint8)
    digit = (b - 48) < 10  # uint8 wraps: one comparison for '0'..'9'
    if not digit.any():
        return _from_text_lines(raw, p)  # empty, blank, or no digits at all
    space = (b == 10) | (b == 32) | (b == 13) | (b == 9)
    if not bool((digit | space).all()):
        return _from_text_lines(raw, p)
    runs = int(digit[0]) + int(np.count_nonzero(digit[1:] > digit[:-1]))
    values = np.fromstring(raw, dtype=np.int64, sep=" ")  # text mode: not the deprecated binary one
    if values.size != runs or int(values.max()) >= 1 << 62:
        return _from_text_lines(raw, p)
    return values


def _from_text_lines(raw: bytes, p: Path) -> np.ndarray:
    text = raw.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    out: list[int] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for token in line.split():
            out.append(_whole(token, f"{_show(p)}:{lineno}"))
    return np.asarray(out, dtype=np.int64)


def _whole(token: str, where: str) -> int:
    """A length from text: an integer, or a float with nothing after the point."""
    try:
        n = int(token)
    except ValueError:
        try:
            x = float(token)
        except ValueError:
            raise LengthsError(f"{where}: {_clip(token)} is not a whole number") from None
        if not math.isfinite(x) or not x.is_integer():
            raise LengthsError(f"{where}: {_clip(token)} is not a whole number") from None
        n = int(x)
    if n < 0:
        raise LengthsError(f"{where}: negative length {n}")
    if n >= 1 << 62:
        raise LengthsError(f"{where}: length {_clip(token)} is too large")
    return n


def _clip(token: str, width: int = 40) -> str:
    shown = ascii(token) if not token.isprintable() else repr(token)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


# --- .jsonl ---------------------------------------------------------------

def _from_jsonl(p: Path, field: str | None) -> np.ndarray:
    """One JSON object per line; the length is ``field``, else the first of
    ``JSONL_FIELDS`` the first object has (then every line must have it). A
    list (``input_ids``) counts as its length."""
    out: list[int] = []
    chosen = field
    with p.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{_show(p)}:{lineno}"
            try:
                obj = json.loads(line)
            except ValueError:
                raise LengthsError(f"{where}: not a JSON line") from None
            if not isinstance(obj, dict):
                raise LengthsError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            if chosen is None:
                chosen = next((name for name in JSONL_FIELDS if name in obj), None)
                if chosen is None:
                    raise LengthsError(f"{where}: no length field (tried {', '.join(JSONL_FIELDS)}; "
                                       "name one with --field)")
            if chosen not in obj:
                raise LengthsError(f"{where}: no field {_clip(chosen)}")
            out.append(_json_length(obj[chosen], where, chosen))
    return np.asarray(out, dtype=np.int64)


def _json_length(value: object, where: str, name: str) -> int:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LengthsError(f"{where}: field {_clip(name)} is {type(value).__name__}, not a length")
    return _whole(repr(value), where)


# --- .npy and .pt ---------------------------------------------------------

def _from_npy(p: Path) -> np.ndarray:
    try:
        arr = np.load(p, allow_pickle=False)
    except ValueError as exc:  # pickled objects, a bad header
        raise LengthsError(f"{_show(p)}: not a numeric .npy array ({_first_line(exc)})") from None
    except (OSError, EOFError) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise LengthsError(f"{_show(p)}: not a .npy file ({_first_line(exc)})") from None
    if isinstance(arr, np.lib.npyio.NpzFile):
        raise LengthsError(f"{_show(p)}: an .npz archive, not one array")
    return _checked(arr, _show(p))


def _from_pt(p: Path) -> np.ndarray:
    """A 1-D tensor or a list of ints saved with ``torch.save``. torch is
    imported only here, and loads with ``weights_only=True``."""
    if not p.exists():
        raise FileNotFoundError(p)
    try:
        import torch
    except ImportError:
        raise LengthsError(f"{_show(p)}: reading .pt needs torch (pip install torch), "
                           "or save the lengths as .npy or .txt") from None
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for a bad file
        if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise LengthsError(f"{_show(p)}: cannot load with torch.load(weights_only=True) "
                           f"({_first_line(exc)})") from None
    if isinstance(obj, torch.Tensor):
        if obj.is_complex() or obj.dtype == torch.bool:
            raise LengthsError(f"{_show(p)}: a tensor of {obj.dtype}, not of lengths")
        wide = torch.float64 if obj.is_floating_point() else torch.int64
        arr = obj.detach().to("cpu").to(wide).numpy()
    elif isinstance(obj, (list, tuple)):
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in obj):
            raise LengthsError(f"{_show(p)}: a list, but not of numbers")
        arr = np.asarray(obj, dtype=np.float64 if any(isinstance(x, float) for x in obj) else np.int64)
    else:
        raise LengthsError(f"{_show(p)}: holds a {type(obj).__name__}, expected a 1-D tensor or a list of lengths")
    return _checked(arr, _show(p))


def _checked(arr: np.ndarray, where: str) -> np.ndarray:
    """A 1-D array of whole, non-negative numbers as int64."""
    if arr.ndim != 1:
        raise LengthsError(f"{where}: expected a 1-D array of lengths, got shape {tuple(arr.shape)}")
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 1 << 62:
            raise LengthsError(f"{where}: a length of {int(arr.max())} is too large")
        out = arr.astype(np.int64)
    elif arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (np.abs(arr) >= 2.0 ** 62)
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise LengthsError(f"{where}: element {at} is {float(arr[at])!r}, not a whole number")
        out = arr.astype(np.int64)
    else:
        raise LengthsError(f"{where}: dtype {arr.dtype} is not a number type")
    if out.size and int(out.min()) < 0:
        at = int(np.flatnonzero(out < 0)[0])
        raise LengthsError(f"{where}: element {at} is a negative length ({int(out[at])})")
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    line = line if line.isprintable() else ascii(line)
    return line if len(line) <= 120 else line[:117] + "..."
