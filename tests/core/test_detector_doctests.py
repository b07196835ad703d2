"""The runnable examples in the detectors' docstrings (STYLE habit 1) hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "detectors.memory",
    "detectors.memory_volatility",
    "detectors.steps",
    "detectors.stall",
    "detectors.throughput",
    "detectors.timeline",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
