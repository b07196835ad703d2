"""Package versions from dist-info metadata, and torch's build from its
``version.py`` read as text: nothing of the training environment is
imported (its torch may need a GPU, another Python, or be broken)."""

from __future__ import annotations

import ast
import re
from importlib import metadata
from pathlib import Path

_SEPARATORS = re.compile(r"[-_.]+")
# version.py is a few hundred bytes; a bigger one is not torch's.
_VERSION_PY_CAP = 64 * 1024


def canonical(name: str) -> str:
    """PEP 503 names: ``Tiny_Data`` and ``tiny-data`` are one package."""
    return _SEPARATORS.sub("-", name).lower()


def package_versions(site_packages: tuple[Path, ...] | list[Path]) -> dict[str, str]:
    """{name: version} of every distribution in these directories; the first
    directory wins where two hold the same package (as on ``sys.path``)."""
    out: dict[str, str] = {}
    for directory in site_packages:
        for dist in metadata.distributions(path=[str(directory)]):
            try:
                name, version = dist.metadata["Name"], dist.version
            except (OSError, KeyError, ValueError):
                continue
            if name and version:
                out.setdefault(canonical(str(name)), str(version))
    return out


def torch_build(site_packages: tuple[Path, ...] | list[Path]) -> tuple[str, str | None, str | None] | None:
    """(``__version__``, ``cuda``, ``git_version``) of the first torch found,
    or None where there is no torch. ``cuda`` is None for a CPU build."""
    for directory in site_packages:
        path = Path(directory) / "torch" / "version.py"
        try:
            if path.stat().st_size > _VERSION_PY_CAP:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        values = _literal_assignments(text)
        version = values.get("__version__")
        if isinstance(version, str):
            cuda, git = values.get("cuda"), values.get("git_version")
            return version, cuda if isinstance(cuda, str) else None, git if isinstance(git, str) else None
    return None


def _literal_assignments(text: str) -> dict[str, object]:
    """``name = 'literal'`` and ``name: T = 'literal'`` at the top of a module;
    anything else (a call, an import) is skipped, never evaluated."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        try:
            out[target] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
    return out
