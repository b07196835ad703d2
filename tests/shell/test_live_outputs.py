"""Every output of a live session hears the Monitor one way (``LiveSetup.fresh``).

The alert history's gate (a restart does not print or send again what it
holds) outside, ``StallStacks.hold`` (a stall page waits for the hung job's
stacks) inside: composed in one place for headless's stdout and the sinks
alike, and ``StallStacks`` must hear each alert before a held output does.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dflash_watch.commands.live_setup import LiveSetup
from dflash_watch.commands.live_sinks import start_sinks
from dflash_watch.monitor import Monitor
from dflash_watch.sinks.settings import AlertsConfig, SinkConfig
from dflash_watch.stacks import HeldListener, StallStacks

SHELL = Path(__file__).resolve().parents[2] / "dflash_watch"


@dataclass
class _History:
    """A gate that records what it wrapped."""

    wrapped: list[tuple[Any, Any]] = field(default_factory=list)

    def gate(self, listener: Any, skipped: Any = None) -> Any:
        self.wrapped.append((listener, skipped))
        return listener


def _setup(tmp_path: Path, *, subscribe_stacks: bool) -> tuple[LiveSetup, StallStacks, _History]:
    monitor = Monitor(keep_lines=0)
    stacks = StallStacks(monitor, None, tmp_path)
    if subscribe_stacks:
        monitor.subscribe(stacks)
    history = _History()
    session = SimpleNamespace(stacks=stacks, _history=history)
    return LiveSetup(None, monitor, session, None, None), stacks, history


def test_the_gate_wraps_the_hold_and_the_output_comes_after_the_stacks(tmp_path: Path) -> None:
    live, stacks, history = _setup(tmp_path, subscribe_stacks=True)
    out: list[Any] = []
    skipped: list[Any] = []
    live.subscribe_output(out.append, skipped.append)
    (inner, given_skipped), = history.wrapped
    assert isinstance(inner, HeldListener) and given_skipped == skipped.append
    assert live.monitor.listens(stacks) and live.monitor.listens(inner)


def test_an_output_before_the_stacks_is_refused(tmp_path: Path) -> None:
    """A held output subscribed before ``StallStacks`` would find no capture
    for the stall alert and send it at once, without its stacks."""
    live, _stacks, history = _setup(tmp_path, subscribe_stacks=False)
    with pytest.raises(RuntimeError, match="StallStacks is not subscribed"):
        live.subscribe_output(print)
    assert history.wrapped == []


def test_the_sinks_subscribe_through_the_one_composition() -> None:
    """``start_sinks`` hands its listener and its recall to the setup's
    ``subscribe_output``; it composes nothing itself."""
    sink = SinkConfig("bell", "bell[0]")
    settings = SimpleNamespace(config=SimpleNamespace(alerts=AlertsConfig((sink,))))
    calls: list[tuple[Any, Any]] = []
    dispatcher = start_sinks(settings, lambda message: None, lambda listener, skipped: calls.append((listener, skipped)))
    try:
        assert dispatcher is not None
        assert calls == [(dispatcher.offer, dispatcher.recall)]
    finally:
        if dispatcher is not None:
            dispatcher.close(1.0)
    assert start_sinks(SimpleNamespace(config=SimpleNamespace(alerts=AlertsConfig())), print,
                       lambda listener, skipped: calls.append((listener, skipped))) is None


def test_no_module_but_live_setup_composes_the_hold_or_the_gate() -> None:
    """One home: ``.hold(`` and ``.gate(`` are called in ``commands/live_setup.py`` only."""
    found = []
    for path in SHELL.rglob("*.py"):
        rel = path.relative_to(SHELL)
        if rel == Path("commands/live_setup.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("hold", "gate")):
                found.append(f"{rel}:{node.lineno}")
    assert not found, found
