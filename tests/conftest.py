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


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    target = os.environ.get("DFLASH_SKIPPED_FOR_FRAMEWORKS")
    if target:
        ids = sorted({i for i in _skipped_for_frameworks if i})
        Path(target).write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")


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
