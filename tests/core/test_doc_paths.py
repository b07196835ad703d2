"""Every module path the README and docs/ name exists (issue 18): a module
that moves leaves no stale pointer behind for a newcomer to follow.

Only the "old path" column of the README's table of moves may name a path
that is gone.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A backticked repository path: a folder or a .py file, no wildcard or placeholder.
PATH = re.compile(r"`([A-Za-z0-9_./-]+/(?:[A-Za-z0-9_./-]*\.py)?)`")
MOVES_HEADER = "| old path | new path |"


def named_paths(text: str) -> list[str]:
    """The paths ``text`` names, without the old-path column of the moves table."""
    out: list[str] = []
    in_moves = False
    for line in text.splitlines():
        if line.strip() == MOVES_HEADER:
            in_moves = True
            continue
        if in_moves and not line.startswith("|"):
            in_moves = False
        if in_moves:
            cells = line.split("|")
            line = "|".join(cells[2:])  # the new-path column only
        out += PATH.findall(line)
    return out


def exists(path: str) -> bool:
    """At the repository root, or inside the package (``baseline/store.py``)."""
    rel = path.lstrip("./")
    return any((base / rel).exists() for base in (ROOT, ROOT / "dflash_watch"))


def test_every_path_the_docs_name_exists() -> None:
    missing = [(doc.name, p) for doc in DOCS for p in named_paths(doc.read_text(encoding="utf-8"))
               if p.startswith(("dflash_watch/", "parsers/", "detectors/", "tests/", "benchmarks/",
                                "scripts/", "deploy/", "baseline/", "commands/", "sources/", "sinks/"))
               and not exists(p)]
    assert missing == []


def test_the_checker_sees_a_stale_path_but_not_an_old_one() -> None:
    text = ("see `parsers/tracebacks.py`\n\n| old path | new path |\n|---|---|\n"
            "| `parsers/faulthandler.py` | `parsers/crash/fault_blocks.py` |\n\nafter\n")
    assert named_paths(text) == ["parsers/tracebacks.py", "parsers/crash/fault_blocks.py"]
    assert not exists("parsers/tracebacks.py") and exists("parsers/crash/fault_blocks.py")
