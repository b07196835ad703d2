from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from dflash_watch.control.tmux import Tmux

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REALWORLD = ROOT.parent / "shared" / "realworld"

# CI runs the README's test command in a bare environment first; the tests
# that skipped there for want of a framework (torch, transformers,
# accelerate, lightning; py-spy for the stall stacks) are then run again
# once those are installed.
# With DFLASH_SKIPPED_FOR_FRAMEWORKS=FILE, their node ids go to FILE.
_FRAMEWORKS = ("torch", "transformers", "accelerate", "lightning", "py-spy")
_skipped_for_frameworks: list[str] = []


def _wants_framework(report: object) -> bool:
    longrepr = getattr(report, "longrepr", None)
    reason = longrepr[-1] if isinstance(longrepr, tuple) else str(longrepr or "")
    return any(name in reason for name in _FRAMEWORKS)


def pytest_collectreport(report: object) -> None:
    if getattr(report, "skipped", False) and _wants_framework(report):
        _skipped_for_frameworks.append(getattr(report, "nodeid", ""))


def pytest_runtest_logreport(report: object) -> None:
    if getattr(report, "skipped", False) and _wants_framework(report):
        _skipped_for_frameworks.append(getattr(report, "nodeid", ""))


def _skip_parts(target: str) -> list[Path]:
    return list(Path(target).parent.glob(f"{Path(target).name}.gw*"))


def _write_ids(path: Path, ids: set[str]) -> None:
    path.write_text("".join(f"{i}\n" for i in sorted(ids)), encoding="utf-8")


def pytest_sessionstart(session: object) -> None:
    """The controller starts with no worker's part left by an earlier run
    (its ids could name tests that no longer exist)."""
    target = os.environ.get("DFLASH_SKIPPED_FOR_FRAMEWORKS")
    if target and not os.environ.get("PYTEST_XDIST_WORKER"):
        for part in _skip_parts(target):
            part.unlink()


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    """Under pytest-xdist each worker writes what it saw (a module skipped
    at collection is reported on its worker only) to ``FILE.<worker>``; the
    controller, whose session ends after every worker's, merges them."""
    target = os.environ.get("DFLASH_SKIPPED_FOR_FRAMEWORKS")
    if not target:
        return
    ids = {i for i in _skipped_for_frameworks if i}
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        _write_ids(Path(f"{target}.{worker}"), ids)
        return
    for part in _skip_parts(target):
        ids.update(line for line in part.read_text(encoding="utf-8").splitlines() if line)
        part.unlink()
    _write_ids(Path(target), ids)


_IN_PROCESS_MAX = 4  # files or tests named on the command line, run without workers
_WORKERS_MAX = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the project's default, pyproject.toml): a worker per
    core, at most ``_WORKERS_MAX``. Most of the suite's time is real
    processes waiting on real clocks; more workers than that would crowd
    the live tests' one-second stall limits on a small machine.

    A few files or tests named on the command line (``pytest
    tests/core/test_x.py::test_y``, what one runs while changing code) run
    in this process: starting workers would take longer than they save."""
    args = [a for a in config.args if not a.startswith("-")]
    if args and len(args) <= _IN_PROCESS_MAX and all("::" in a or a.endswith(".py") for a in args):
        return 0
    return max(1, min(_WORKERS_MAX, os.cpu_count() or 1))


# -- the job state of every test in a folder of its own -----------------------
@pytest.fixture(autouse=True)
def _private_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """``XDG_STATE_HOME`` per test, for the test and what it starts: job
    state and locks (``control.spec.default_state_dir``) never go to the
    developer's ~/.local/state, and tests running side by side (pytest-xdist)
    never share a state file. A test that sets its own still wins."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


# -- a private tmux server: the one home of what every tmux test needs --------
@pytest.fixture
def tmux_socket() -> Iterator[str]:
    """The name (``tmux -L``) of a tmux server of this test's own.

    The user's own server and other tests' are never touched: at the end the
    server is killed, with whatever still runs in it, and the socket file
    tmux leaves behind is removed. Skips where tmux is not installed.
    (Imported here: the pure core's tests load no shell module.)"""
    from dflash_watch.control.tmux import Tmux

    if not Tmux().available:
        pytest.skip("tmux not installed")
    name = f"dfw-test-{uuid.uuid4().hex[:12]}"
    yield name
    Tmux(socket=name).kill_server()  # (it removes the socket file too)


@pytest.fixture
def tmux(tmux_socket: str) -> Tmux:
    """That private server, as job control drives it."""
    from dflash_watch.control.tmux import Tmux

    return Tmux(socket=tmux_socket)
