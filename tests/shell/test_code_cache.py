"""The compiled-code cache of dataclasses' generated methods (dflash_watch/code_cache.py).

What it must hold: a class made with the cache behaves as one made without
it (its methods are the code of the same text), a cached text runs the
cached code and is not compiled again, a changed text gets new code, the
file is read back by the next process, a bad file is an empty cache, and
nothing is written where Python writes no bytecode.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import marshal
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from types import CodeType

import pytest

from dflash_watch import code_cache
from dflash_watch.code_cache import MAX_DATABASES, MAX_ENTRIES, CodeCache

ROOT = Path(__file__).resolve().parents[2]


def _made_with(cache: CodeCache, source: str) -> dict[str, object]:
    """The namespace of ``source`` (class definitions) run with ``cache``
    as the ``exec`` of ``dataclasses``, put back after."""
    before = dataclasses.__dict__.get("exec")
    dataclasses.exec = cache.exec  # type: ignore[attr-defined]
    try:
        return _run_module(source)
    finally:
        if before is None:
            del dataclasses.exec  # type: ignore[attr-defined]
        else:
            dataclasses.exec = before  # type: ignore[attr-defined]


def _run_module(source: str) -> dict[str, object]:
    """``source`` run as a module's body (dataclasses look the module up)."""
    module = types.ModuleType("made_with_cache")
    sys.modules[module.__name__] = module
    try:
        exec(compile(textwrap.dedent(source), "<classes>", "exec", dont_inherit=True), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.__dict__


CLASSES = """
from dataclasses import dataclass, field

@dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: float = 2.5
    tags: tuple[str, ...] = ()

@dataclass(order=True)
class Box:
    w: int
    h: int = 1
    items: list[int] = field(default_factory=list)
"""


def test_classes_made_through_the_cache_behave_as_without_it(tmp_path: Path) -> None:
    cache = CodeCache(str(tmp_path / "c.pyc"))
    made = _made_with(cache, CLASSES)
    plain = _run_module(CLASSES)
    for ns in (made, plain):
        Point, Box = ns["Point"], ns["Box"]
        p = Point(1)  # type: ignore[operator]
        assert repr(p) == "Point(x=1, y=2.5, tags=())"
        assert p == Point(1, 2.5, ()) and hash(p) == hash(Point(1, 2.5, ()))  # type: ignore[operator]
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 3  # type: ignore[attr-defined]
        assert Box(1, 2) < Box(2) and Box(3).items == []  # type: ignore[operator]
        assert Box(1).items is not Box(1).items  # type: ignore[operator]
    assert cache.codes and cache.fresh
    # every method's code is one the cache holds (the text's module code
    # holds ``__create_fn__``'s, which holds the method's), the very object
    held = {id(inner) for code in cache.codes.values() for outer in code.co_consts if isinstance(outer, CodeType)
            for inner in outer.co_consts if isinstance(inner, CodeType)}
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        fn = getattr(made["Point"], name)
        fn = getattr(fn, "__wrapped__", fn)  # (__repr__ is wrapped against recursion)
        assert id(fn.__code__) in held, name


def test_a_cached_text_is_not_compiled_again_and_a_changed_one_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = str(tmp_path / "c.pyc")
    first = CodeCache(path)
    _made_with(first, CLASSES)
    assert first.save()
    second = CodeCache(path)
    assert set(second.codes) == set(first.codes)
    compiled: list[str] = []
    real_compile = compile

    def counting(source: str, *args: object, **kwargs: object) -> object:
        compiled.append(source)
        return real_compile(source, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(code_cache, "compile", counting, raising=False)
    made = _made_with(second, CLASSES)
    assert compiled == [] and not second.fresh
    assert made["Point"](4).y == 2.5  # type: ignore[operator, attr-defined]
    # a field more: new texts, compiled, the old ones still there
    _made_with(second, CLASSES.replace("    tags: tuple[str, ...] = ()", "    tags: tuple[str, ...] = ()\n    z: int = 0"))
    assert compiled and second.fresh
    assert second.save()
    assert set(CodeCache(path).codes) == set(second.codes) > set(first.codes)


def test_exec_without_a_namespace_runs_in_its_callers(tmp_path: Path) -> None:
    cache = CodeCache(str(tmp_path / "c.pyc"))

    def caller() -> object:
        here: dict[str, object] = {}
        local_value = 41  # noqa: F841 (read by the text, through the caller's locals)
        cache.exec("here['out'] = local_value + 1")
        return here["out"]

    assert caller() == 42
    assert cache.codes == {}  # passed on, not cached


def test_the_text_is_compiled_without_this_modules_future_flags(tmp_path: Path) -> None:
    # dataclasses' own module has no ``from __future__ import annotations``: its
    # texts' annotations are evaluated when the function is made. This module
    # has it; a compile that inherited it would keep them as strings.
    cache = CodeCache(str(tmp_path / "c.pyc"))
    with pytest.raises(NameError):
        cache.exec("def f(x: undefined_name) -> None: pass", {})


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not marshal at all",
        marshal.dumps((b"wrong magic", {"x = 1": compile("x = 1", "<string>", "exec")})),  # another interpreter's
        marshal.dumps((None, {"x = 1": compile("x = 1", "<string>", "exec")})),
        marshal.dumps([1, 2]),
        marshal.dumps(compile("x = 1", "<string>", "exec"))[:-3],  # cut short
    ],
)
def test_a_file_it_cannot_read_is_an_empty_cache(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.pyc"
    path.write_bytes(content)
    assert CodeCache(str(path)).codes == {}


def test_entries_of_the_wrong_kinds_make_the_whole_file_unread(tmp_path: Path) -> None:
    from importlib.util import MAGIC_NUMBER

    path = tmp_path / "c.pyc"
    good = compile("x = 1", "<string>", "exec")
    for stored in (
        (MAGIC_NUMBER, {"x = 1": good, "y = 2": "not code"}, {}),
        (MAGIC_NUMBER, {"x = 1": good}, {"key": "not bytes"}),
        (MAGIC_NUMBER, {"x = 1": good}, ["not a dict"]),
        (MAGIC_NUMBER, {"x = 1": good}),  # the first release's layout
    ):
        path.write_bytes(marshal.dumps(stored))
        cache = CodeCache(str(path))
        assert cache.codes == {} and cache.databases == {}, stored
    path.write_bytes(marshal.dumps((MAGIC_NUMBER, {"x = 1": good}, {"key": b"blob"})))
    cache = CodeCache(str(path))
    assert set(cache.codes) == {"x = 1"} and cache.databases == {"key": b"blob"}


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sub" / "c.pyc"
    cache = CodeCache(str(path))
    _made_with(cache, CLASSES)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert not cache.save() and not path.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert cache.save() and path.exists()
    assert not cache.save()  # nothing new since


def test_an_unwritable_folder_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    cache = CodeCache(str(blocker / "c.pyc"))
    _made_with(cache, CLASSES)
    assert not cache.save()
    assert cache.fresh  # still owed
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
    # the temporary file written, the rename refused (a folder stands at the path): removed again
    (tmp_path / "c.pyc").mkdir()
    cache = CodeCache(str(tmp_path / "c.pyc"))
    _made_with(cache, CLASSES)
    assert not cache.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pyc", "file"]


def test_a_full_cache_keeps_what_this_run_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = str(tmp_path / "c.pyc")
    cache = CodeCache(path)
    for i in range(MAX_ENTRIES + 1):
        cache.codes[f"x = {i}"] = compile(f"x = {i}", "<string>", "exec")
    cache.exec("y = 1", {})
    assert cache.save()
    assert set(CodeCache(path).codes) == {"y = 1"}
    small = CodeCache(path)
    small.exec("z = 2", {})
    assert small.save()
    assert set(CodeCache(path).codes) == {"y = 1", "z = 2"}  # under the cap: merged


def test_a_full_cache_keeps_the_databases_this_run_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = str(tmp_path / "c.pyc")
    cache = CodeCache(path)
    for i in range(MAX_DATABASES + 1):
        cache.databases[f"old {i}"] = b"x"
    assert cache.database("old 3") == b"x"
    cache.keep_database("new", b"y")
    assert cache.save()
    assert CodeCache(path).databases == {"old 3": b"x", "new": b"y"}
    small = CodeCache(path)
    small.keep_database("newer", b"z")
    assert small.save()
    assert set(CodeCache(path).databases) == {"old 3", "new", "newer"}  # under the cap: merged


def _command(pycache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return subprocess.run(
        [sys.executable, "-m", "dflash_watch", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )


def test_a_command_writes_the_cache_and_the_next_reads_it(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("2026-11-29 10:00:00 step 1/10 | loss 2.0 | 100 tok/s\nTraceback (most recent call last):\n"
                   '  File "t.py", line 1, in <module>\nRuntimeError: boom\n', encoding="utf-8")
    pycache = tmp_path / "pycache"
    first = _command(pycache, "replay", "--json", str(log))
    assert first.returncode in (0, 1), first.stderr
    found = list(pycache.rglob("generated_code.*"))
    assert len(found) == 1
    codes = CodeCache(str(found[0])).codes
    assert any("def __init__(self,time:_type_time,source:_type_source,step:_type_step" in text for text in codes)  # Progress's, among others
    if importlib.util.find_spec("hyperscan") is not None:
        assert [key.split(" ", 2)[:2] for key in CodeCache(str(found[0])).databases] == [
            ["hyperscan", importlib.metadata.version("hyperscan")]
        ]
    stamp = found[0].stat().st_mtime_ns
    second = _command(pycache, "replay", "--json", str(log))
    assert second.stdout == first.stdout and second.returncode == first.returncode
    assert found[0].stat().st_mtime_ns == stamp  # read, nothing new to write
    help_run = _command(tmp_path / "other", "--help")
    assert help_run.returncode == 0 and not list((tmp_path / "other").rglob("generated_code.*"))


LITERALS = ("tok/s", "Traceback", "loss", "Error")
TEXT = "a\nstep 1 | 10 tok/s\nnothing\nTraceback (most recent call last):\nloss 2.0\nlast line no newline Error"


@pytest.fixture
def fresh_scanner_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """No database compiled in this process yet; the scanner's store put back after."""
    from dflash_watch.parsers import scanner

    monkeypatch.setattr(scanner, "_DATABASES", {})
    monkeypatch.setattr(scanner, "_STORE", None)


def test_the_scanners_database_is_kept_and_loaded_not_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_scanner_state: None
) -> None:
    hyperscan = pytest.importorskip("hyperscan", reason="the Hyperscan scanner needs the hyperscan package")
    from dflash_watch.parsers import scanner

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    expected = scanner.RegexScanner(LITERALS).ends(TEXT)
    path = str(tmp_path / "c.pyc")
    first = CodeCache(path)
    scanner.keep_databases(first)
    assert scanner.HyperscanScanner(LITERALS, hyperscan).ends(TEXT) == expected
    (key,) = first.databases
    assert key.startswith(f"hyperscan {hyperscan.__version__} (?:") and first.fresh
    assert first.save()

    second = CodeCache(path)
    assert second.databases == first.databases
    scanner.keep_databases(second)
    monkeypatch.setattr(scanner, "_DATABASES", {})

    class NoCompile:
        def compile(self, **_: object) -> None:
            raise AssertionError("compiled although the store holds it")

    monkeypatch.setattr(hyperscan, "Database", NoCompile)
    assert scanner.HyperscanScanner(LITERALS, hyperscan).ends(TEXT) == expected
    assert not second.fresh  # nothing new to write


def test_a_damaged_database_is_compiled_anew_and_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_scanner_state: None
) -> None:
    hyperscan = pytest.importorskip("hyperscan", reason="the Hyperscan scanner needs the hyperscan package")
    from dflash_watch.parsers import scanner

    expected = scanner.RegexScanner(LITERALS).ends(TEXT)
    cache = CodeCache(str(tmp_path / "c.pyc"))
    scanner.keep_databases(cache)
    scanner.HyperscanScanner(LITERALS, hyperscan)
    (key,) = cache.databases
    good = cache.databases[key]
    for damaged in (b"", b"garbage" * 100, good[: len(good) // 2]):
        cache.databases[key] = damaged
        monkeypatch.setattr(scanner, "_DATABASES", {})
        assert scanner.HyperscanScanner(LITERALS, hyperscan).ends(TEXT) == expected
        assert cache.databases[key] == good


def test_a_database_that_fails_its_check_scan_is_not_used(fresh_scanner_state: None) -> None:
    """Another CPU's database loads but refuses to scan (Hyperscan's platform
    check): it is dropped at load, never met mid-run."""
    from dflash_watch.parsers import scanner

    class Error(Exception):
        pass

    scans: list[bytes] = []

    class Loaded:
        def scan(self, data: bytes, scratch: object = None) -> None:
            scans.append(data)
            raise Error("database built for another platform")

    class Scratch:
        def __init__(self, database: object) -> None:
            pass

    store = CodeCache.__new__(CodeCache)
    store.databases, store.used_databases, store.fresh = {"k": b"blob"}, set(), False
    fake = types.SimpleNamespace(loadb=lambda blob, mode: Loaded(), HS_MODE_BLOCK=1, Scratch=Scratch, error=Error)
    scanner.keep_databases(store)
    assert scanner._stored("k", fake) is None
    assert scans == [b"\n"]
    assert scanner._stored("other", fake) is None  # none kept under that key
    Loaded.scan = lambda self, data, scratch=None: None  # type: ignore[method-assign]
    assert isinstance(scanner._stored("k", fake), Loaded)
