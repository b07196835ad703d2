"""The runnable examples in the detectors' docstrings (STYLE habit 1) hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "detectors.alloc_thrash",
    "detectors.counters",
    "detectors.memory",
    "detectors.memory_volatility",
    "detectors.padding",
    "detectors.recompile_rate",
    "detectors.steps",
    "detectors.stall",
    "detectors.throughput",
    "detectors.timeline",
    "parsers.padding",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
