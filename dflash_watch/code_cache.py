"""What a start would otherwise compile again: dataclasses' code, the scanner's database.

Python 3.11's ``dataclasses`` write each class's methods (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, a frozen class's ``__setattr__``...)
as source text and ``exec`` it when the class is made: about 300 functions
for the classes `dflash-watch replay` loads, about a quarter of its
start-up (callgrind, a one-line log: parsing and compiling those texts
was 170M of 908M instructions). The texts are the same at every start,
so their compiled code is kept beside the interpreter's own bytecode cache
and read back next time. The log scanner's Hyperscan database (~10 ms to
compile, a tenth of the start) is kept in the same file
(``parsers.scanner.keep_databases``; loaded, it is checked by a scan).
With both, that start-up went from 908M to 604M instructions.

Nothing else changes. ``dataclasses`` still writes its text and runs it;
only its name ``exec`` is given a twin (``install``) that looks the text up
and runs the code ``compile`` makes of it with the flags ``exec`` uses
(``dont_inherit``: none of this module's ``__future__`` flags). The text is
the key, so a class whose fields change writes a new text and gets new
code. Any ``exec`` the module makes without a namespace is passed on as it
came, in its caller's namespaces.

Where and when: the file sits where Python puts this package's bytecode
(``importlib.util.cache_from_source``: the package's ``__pycache__`` or
``sys.pycache_prefix``, tagged with the interpreter and optimization
level), is read once at install, and is written, whole and atomically, at
exit, only if something was compiled that it lacked and only where Python
itself writes bytecode (``sys.dont_write_bytecode`` off). A file that
cannot be read (missing, another interpreter's, damaged) is an empty cache;
one that cannot be written is left as it was. It is trusted as the ``.pyc``
files beside it are: whoever can write there can change what runs anyway.

``cli.main`` installs it before a command's modules are imported, so every
command starts faster and ``--help`` imports nothing more.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import marshal
import os
import sys
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType
from typing import Any

# More entries than this in the file (classes changed many times over, or
# many commands' classes): the next write keeps only what this run used.
MAX_ENTRIES = 4096
# More databases than this (a scanner's literals changed many times over, or
# many custom progress patterns): the next write keeps only this run's.
MAX_DATABASES = 16


class CodeCache:
    """Compiled code by source text, and serialized scanner databases by
    key, read from and written to one file."""

    __slots__ = ("path", "codes", "databases", "used", "used_databases", "fresh")

    def __init__(self, path: str) -> None:
        self.path = path
        self.codes, self.databases = _read(path)
        self.used: set[str] = set()
        self.used_databases: set[str] = set()
        self.fresh = False  # something compiled that the file lacks

    def code(self, source: str) -> CodeType:
        """``compile(source)`` as ``exec(source)`` would compile it."""
        code = self.codes.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self.codes[source] = code
            self.fresh = True
        self.used.add(source)
        return code

    def exec(self, source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> None:  # noqa: A002
        """``exec``, with a str's compiled code kept. Without ``globals``,
        ``exec`` runs in its caller's namespaces: passed on as it came."""
        if globals is None:
            frame = sys._getframe(1)
            builtins.exec(source, frame.f_globals, frame.f_locals if locals is None else locals)
            return
        if type(source) is str:
            source = self.code(source)
        builtins.exec(source, globals, locals)

    def database(self, key: str) -> bytes | None:
        """``parsers.scanner.DatabaseStore``: the database kept under ``key``."""
        self.used_databases.add(key)
        return self.databases.get(key)

    def keep_database(self, key: str, blob: bytes) -> None:
        self.databases[key] = blob
        self.used_databases.add(key)
        self.fresh = True

    def save(self) -> bool:
        """Write the file if it lacks something compiled here (whole, by a
        rename); False where nothing was written."""
        if not self.fresh or sys.dont_write_bytecode:
            return False
        codes, databases = self.codes, self.databases
        if len(codes) > MAX_ENTRIES:
            codes = {text: codes[text] for text in self.used}
        if len(databases) > MAX_DATABASES:
            databases = {key: databases[key] for key in self.used_databases if key in databases}
        try:
            folder = os.path.dirname(self.path)
            os.makedirs(folder, exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"  # (one writer per process: ``tempfile`` costs its import)
            try:
                with open(tmp, "wb") as fh:
                    marshal.dump((MAGIC_NUMBER, codes, databases), fh)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except (OSError, ValueError):
            return False  # a read-only install, a full disk: next start compiles again
        self.fresh = False
        return True


def _read(path: str) -> tuple[dict[str, CodeType], dict[str, bytes]]:
    """The file's code and databases; both empty where it cannot be read
    or holds anything but what ``save`` writes."""
    try:
        with open(path, "rb") as fh:
            stored = marshal.load(fh)
    except (OSError, EOFError, ValueError, TypeError):
        return {}, {}
    if type(stored) is not tuple or len(stored) != 3 or stored[0] != MAGIC_NUMBER:
        return {}, {}
    codes, databases = stored[1], stored[2]
    if type(codes) is not dict or type(databases) is not dict:
        return {}, {}
    if not all(type(k) is str and type(v) is CodeType for k, v in codes.items()):
        return {}, {}
    if not all(type(k) is str and type(v) is bytes for k, v in databases.items()):
        return {}, {}
    return codes, databases


def cache_path() -> str:
    """The file, where Python puts this package's bytecode."""
    return cache_from_source(os.path.join(os.path.dirname(os.path.abspath(__file__)), "generated_code.py"))


_installed: CodeCache | None = None


def install(path: str | None = None) -> CodeCache | None:
    """Give ``dataclasses`` the caching ``exec`` (once per process) and
    write what it compiled at exit. None on an interpreter that keeps no
    bytecode cache (``sys.implementation.cache_tag`` None)."""
    global _installed
    if _installed is None:
        try:
            path = path or cache_path()
        except NotImplementedError:
            return None
        import dataclasses

        from dflash_watch.parsers.scanner import keep_databases

        _installed = CodeCache(path)
        dataclasses.exec = _installed.exec  # type: ignore[attr-defined]
        keep_databases(_installed)
        atexit.register(_installed.save)
    return _installed
