"""The core (parsers/, detectors/) stays pure: this is the import contract.

The core is installed and imported as ``dflash_watch.parsers`` and
``dflash_watch.detectors`` (no top-level ``parsers`` or ``detectors`` in
site-packages to clash with another project's). Inside, it names itself
only relatively (``.events``, ``..parsers.events``), never ``dflash_watch``:
importing it loads the package's own light ``__init__`` and nothing else
of the shell.

Two checks that can each fail: a static walk of every module's imports and
calls, and a real import of the whole core in a fresh interpreter that must
not pull in the shell's heavy or side-effecting modules. And over the
whole tree, shell and core: no import circle (``import_graph``, below).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ("parsers", "detectors")
FORBIDDEN_MODULES = {
    "textual", "rich", "watchdog", "pynvml", "subprocess", "dflash_watch",
    "threading", "multiprocessing", "asyncio", "socket", "time", "plotext",
}

FORBIDDEN_CALLS = {"open", "now", "today", "utcnow", "time", "monotonic", "perf_counter", "sleep"}


def violations(source: str, filename: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom):
            # Relative: within its own package, up to a package above it in
            # the core, or (from the core's top) into the other half of the
            # core; never further up into the shell. Subpackages
            # (parsers/crash/) sit one level deeper.
            names = []
            package = Path(filename).parts[:-1] or ("parsers",)
            up = node.level - 1
            top = (node.module or "").split(".")[0] if up == len(package) else package[0]
            if up > len(package) or top not in CORE:
                found.append(f"{filename}:{node.lineno} imports {'.' * node.level}{node.module or ''}")
        else:
            names = []
        for name in names:
            if name.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{filename}:{node.lineno} imports {name}")
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in FORBIDDEN_CALLS:
                found.append(f"{filename}:{node.lineno} calls {name}()")
    return found


def core_files() -> list[Path]:
    return [p for pkg in CORE for p in sorted((ROOT / pkg).rglob("*.py"))]


def test_core_files_exist() -> None:
    assert len(core_files()) >= 6


def test_core_has_no_forbidden_imports_or_clock_or_file_calls() -> None:
    found = []
    for path in core_files():
        found += violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == []


def test_checker_catches_a_violation() -> None:
    bad = textwrap.dedent(
        """
        import subprocess
        from textual.app import App
        from dflash_watch.monitor import Monitor
        import time
        from ..monitor import Monitor
        from ..parsers.events import Progress
        x = open("f")
        y = datetime.datetime.now()
        """
    )
    found = violations(bad, "bad.py")
    assert len(found) == 7, found


def test_importing_the_core_pulls_in_no_shell_module() -> None:
    mods = [".".join(("dflash_watch", *p.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
            for pkg in CORE for p in sorted((ROOT / pkg).rglob("*.py"))]
    code = (
        "import sys, importlib\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        "core = ('dflash_watch', 'dflash_watch.parsers', 'dflash_watch.detectors')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('textual','rich','watchdog','pynvml','subprocess','dflash_watch','plotext') "
        "and not (m in core or m.startswith(('dflash_watch.parsers.', 'dflash_watch.detectors.'))))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_nothing_imports_the_core_by_its_bare_name() -> None:
    """``parsers`` and ``detectors`` are only ever ``dflash_watch.parsers`` and
    ``dflash_watch.detectors``: a bare ``import parsers`` would load a second
    copy of every event class (isinstance fails across them), or another
    distribution's ``detectors``."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".git", "build", "dist") or rel.parts[:2] in (("dflash_watch", "parsers"),
                                                                       ("dflash_watch", "detectors")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(rel))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [])
            found += [f"{rel}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in CORE]
    assert found == []


def test_the_package_carries_the_core_and_the_top_level_does_not() -> None:
    """What ``pip install .`` ships: the core inside ``dflash_watch`` only."""
    import tomllib

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["dflash_watch*"]
    for pkg in CORE:
        inside = ROOT / "dflash_watch" / pkg
        assert inside.is_dir() and (inside / "__init__.py").samefile(ROOT / pkg / "__init__.py")


# -- no import circle ------------------------------------------------------------
#
# The whole tree, the core under its installed names (``dflash_watch.parsers``,
# ``dflash_watch.detectors``). An arrow is an import that runs when the module
# is loaded: module level, inside ``if``/``try``/``with`` and class bodies.
# Imports inside functions run later and cannot deadlock a load; they are
# counted separately (``LAZY``), and a circle through them must be one that is
# listed below, each with why it is still there. Imports under
# ``if TYPE_CHECKING:`` never run and are not arrows.

# Circles through function-level imports that are known and owned elsewhere.
KNOWN_LAZY_CIRCLES: set[frozenset[str]] = set()


def _module_files(root: Path) -> dict[str, Path]:
    out = {}
    shell = root / "dflash_watch"
    files = [(p, p.relative_to(shell).parts) for p in sorted(shell.rglob("*.py"))
             if p.relative_to(shell).parts[0] not in CORE]
    files += [(p, p.relative_to(root).parts) for pkg in CORE for p in sorted((root / pkg).rglob("*.py"))]
    for path, parts in files:
        name = ".".join(("dflash_watch", *parts)).removesuffix(".py")
        out[name.removesuffix(".__init__")] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, lazy: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run on load (and, with ``lazy``, those in functions)."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(stmts: list[ast.stmt], in_function: bool) -> None:
        for node in stmts:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if lazy or not in_function:
                    out.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, True)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse, in_function)
            else:
                for block in ("body", "orelse", "finalbody"):
                    visit([s for s in getattr(node, block, []) if isinstance(s, ast.stmt)], in_function)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body, in_function)
                for case in getattr(node, "cases", []):
                    visit(case.body, in_function)

    visit(tree.body, False)
    return out


def import_graph(root: Path = ROOT, lazy: bool = False) -> dict[str, set[str]]:
    """module -> the dflash_watch modules it imports (an imported name that is a
    submodule counts as that submodule; anything else as its module)."""
    mods = _module_files(root)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), lazy):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    edges[mod].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_import_graph_has_no_circle_at_module_level() -> None:
    edges = import_graph()
    assert len(edges) > 150 and "dflash_watch.parsers.events" in edges["dflash_watch.monitor"]
    assert circles(edges) == []


def test_function_level_import_circles_are_only_the_known_ones() -> None:
    found = {frozenset(group) for group in circles(import_graph(lazy=True))}
    assert found - KNOWN_LAZY_CIRCLES == set()


def test_circle_checker_catches_a_circle_and_ignores_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "dflash_watch"
    (pkg / "sub").mkdir(parents=True)
    for core in CORE:
        (tmp_path / core).mkdir()
        (tmp_path / core / "__init__.py").write_text("")
    (tmp_path / "parsers" / "events.py").write_text("from ..detectors import base\n")
    (tmp_path / "detectors" / "base.py").write_text("from ..parsers.events import X\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("try:\n    from .. import a\nexcept ImportError:\n    pass\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n")
    (pkg / "d.py").write_text("from .c import C\ndef f():\n    from . import c\n")
    found = circles(import_graph(tmp_path))
    assert sorted(found) == [["dflash_watch.a", "dflash_watch.sub.b"],
                             ["dflash_watch.detectors.base", "dflash_watch.parsers.events"]]
    (pkg / "c.py").write_text("def g():\n    from .d import D\n")
    assert ["dflash_watch.c", "dflash_watch.d"] in circles(import_graph(tmp_path, lazy=True))
    assert ["dflash_watch.c", "dflash_watch.d"] not in circles(import_graph(tmp_path))
