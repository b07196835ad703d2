"""The core (parsers/, detectors/) stays pure: this is the import contract.

The core is installed and imported as ``dflash_watch.parsers`` and
``dflash_watch.detectors`` (no top-level ``parsers`` or ``detectors`` in
site-packages to clash with another project's). Inside, it names itself
only relatively (``.events``, ``..parsers.events``), never ``dflash_watch``:
importing it loads the package's own light ``__init__`` and nothing else
of the shell.

Two checks that can each fail: a static walk of every module's imports and
calls, and a real import of the whole core in a fresh interpreter that must
not pull in the shell's heavy or side-effecting modules.
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
            # Relative: within its own package, or (``..``) into the other
            # half of the core; never further up into the shell.
            names = []
            top = (node.module or "").split(".")[0]
            if node.level > 2 or (node.level == 2 and top not in CORE):
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
    mods = [f"dflash_watch.{pkg}.{p.stem}" if p.stem != "__init__" else f"dflash_watch.{pkg}"
            for pkg in CORE for p in sorted((ROOT / pkg).glob("*.py"))]
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
