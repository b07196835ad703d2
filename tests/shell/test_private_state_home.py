"""Every test's job state goes to a folder of its own (``conftest._private_state_home``).

Job state and locks were written to the developer's ~/.local/state by every
tmux job test (hundreds of files), and tests running side by side under
pytest-xdist would share one folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_watch.control.spec import default_state_dir

_SEEN: list[Path] = []


@pytest.mark.parametrize("n", [1, 2])
def test_the_state_dir_is_the_tests_own_and_its_children_see_it(n: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    here = default_state_dir()
    assert here.is_relative_to(tmp_path_factory.getbasetemp())
    assert not here.is_relative_to(Path.home() / ".local")
    assert here not in _SEEN  # one per test, not one per session
    _SEEN.append(here)
    child = subprocess.run(
        [sys.executable, "-c", "from dflash_watch.control.spec import default_state_dir; print(default_state_dir())"],
        capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )
    assert child.stdout.strip() == str(here)
