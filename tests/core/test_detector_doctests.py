"""The runnable examples in the detectors' docstrings (STYLE habit 1) hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "dflash_watch.detectors.alloc_thrash",
    "dflash_watch.detectors.counters",
    "dflash_watch.detectors.memory",
    "dflash_watch.detectors.memory_volatility",
    "dflash_watch.detectors.padding",
    "dflash_watch.detectors.recompile_rate",
    "dflash_watch.detectors.steps",
    "dflash_watch.detectors.stall",
    "dflash_watch.detectors.throughput",
    "dflash_watch.detectors.timeline",
    "dflash_watch.parsers.padding",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
