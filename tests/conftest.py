from __future__ import annotations

import sys
from pathlib import Path

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
    import os

    target = os.environ.get("DFLASH_SKIPPED_FOR_FRAMEWORKS")
    if target:
        ids = sorted({i for i in _skipped_for_frameworks if i})
        Path(target).write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
