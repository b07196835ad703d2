"""The runnable examples in the detectors' docstrings (STYLE habit 1) hold."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Every core module that shows an example runs it: a newcomer's docstring
# example is checked without being listed anywhere.
# (Subpackages too: ``parsers/progress/hints.py`` is ``dflash_watch.parsers.progress.hints``.)
MODULES = sorted(
    ".".join(("dflash_watch", *path.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
    for package in ("detectors", "parsers")
    for path in (ROOT / package).rglob("*.py")
    if ">>>" in path.read_text(encoding="utf-8")
)


def test_the_core_shows_examples() -> None:
    assert len(MODULES) >= 20, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
