"""How many pytest-xdist workers ``-n auto`` starts (``conftest.pytest_xdist_auto_num_workers``).

The whole suite runs on every core (at most four); a few files or tests
named on the command line run in one process, where starting workers costs
more than it saves and a debugger works.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

_ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


@dataclass
class _Config:
    args: list[str]


@pytest.fixture
def workers(pytestconfig: pytest.Config) -> Callable[..., int]:
    """The hook of the suite's own conftest (tests/shell has a conftest.py of
    its own, so ``import conftest`` here finds that one)."""
    (root,) = [p for p in pytestconfig.pluginmanager.get_plugins()
               if getattr(p, "__file__", None) and Path(p.__file__).resolve() == _ROOT_CONFTEST]
    return lambda *args: root.pytest_xdist_auto_num_workers(_Config(list(args)))


def test_a_few_named_files_or_tests_run_in_this_process(workers: Callable[..., int]) -> None:
    assert workers("tests/core/test_lanes.py") == 0
    assert workers("tests/core/test_lanes.py::test_one", "tests/shell/test_cli.py") == 0
    assert workers(*[f"tests/core/test_{i}.py" for i in range(4)]) == 0


@pytest.mark.parametrize("args", [(), ("tests",), ("tests/core",), tuple(f"tests/core/test_{i}.py" for i in range(5))],
                         ids=["whole-suite", "tests", "a-folder", "five-files"])
@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 2), (16, 4), (None, 1)])
def test_the_suite_a_folder_or_many_files_run_on_every_core_at_most_four(
    args: tuple[str, ...], cores: int | None, expected: int, workers: Callable[..., int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert workers(*args) == expected
