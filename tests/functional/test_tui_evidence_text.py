"""Evidence reads as text: nested values as lines, never Python reprs, log text never markup."""

from __future__ import annotations

import io

from rich.console import Console
from tui_helpers import UTC, make_app, scene

from dflash_watch.detectors.base import Alert
from dflash_watch.tui.screens.evidence import EvidenceScreen, evidence_text


def rendered(parts) -> str:
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    for part in parts:
        console.print(part)
    return console.export_text()


def test_a_throughput_drops_suspects_read_as_lines_not_a_repr():
    s = scene("volatile", minutes=20)
    drop = next(a for a in s.monitor.alerts.history if a.detector == "throughput_drop" and a.state == "firing")
    assert isinstance(drop.evidence["suspects"][0], dict)
    text = rendered(evidence_text(drop, UTC))
    assert "{'" not in text and "[{" not in text and "'what'" not in text
    line = next(line for line in text.splitlines() if "suspects" in line)
    assert "padding_efficiency 58%" in line, line
    assert "explains the throughput drop" in text


def test_a_process_exits_crash_dict_reads_as_key_value_lines():
    s = scene("crashed", minutes=4)
    exit_alert = next(a for a in s.monitor.alerts.history if a.detector == "process_exit")
    text = rendered(evidence_text(exit_alert, UTC))
    assert "{'" not in text and "'kind'" not in text
    assert "exc_type: RuntimeError" in text and "kind: fx_tracing" in text
    assert "time: 10:" in text  # a clock time, not 1764411601.0


async def test_markup_inside_evidence_values_is_shown_as_typed():
    app, s, job = make_app("healthy")
    evil = Alert(time=s.now, detector="throughput_drop", state="firing", severity="warning",
                 message="throughput dropped", source="train.log:3",
                 evidence={"suspects": [{"what": "[bold red]pad[/]", "now": 0.4, "baseline": 0.9,
                                         "says": "[link=http://evil]click[/link] \x1b[31mred"}],
                           "crash": {"exc_type": "[reverse]Err[/reverse]", "thread": "[blink]t[/]"}})
    parts = evidence_text(evil, UTC)
    text = rendered(parts)
    for literal in ("[bold red]pad[/]", "[link=http://evil]click[/link]", "[reverse]Err[/reverse]", "[blink]t[/]"):
        assert literal in text, literal
    assert "\x1b" not in text
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.open_evidence(evil)
        await pilot.pause(0.3)
        assert isinstance(app.screen, EvidenceScreen)
        from rich.table import Table
        from rich.text import Text

        # Every Static holds a Text (or a grid of Texts): Rich never parses those as markup.
        for widget in app.screen.query("Static"):
            content = widget.content
            cells = [c for col in content.columns for c in col._cells] if isinstance(content, Table) else [content]
            assert all(isinstance(c, Text) for c in cells), cells


def test_a_stalls_captured_stacks_read_as_frames_under_each_pid():
    stall = Alert(
        1_796_180_000.0, "stall", "firing", "warning", "no progress for 25 min", "train.log:9",
        evidence={
            "silence_s": 1500.0,
            "stacks_status": "captured",
            "stacks_file": "/state/stacks-20261202T030000Z-job.txt",
            "stacks": [
                {"pid": 4242, "command": "python train.py [red]x[/red]", "thread": "MainThread",
                 "frames": ["wait_in_all_reduce (train.py:88)", "step (train.py:120)"], "error": None},
                {"pid": 4243, "command": "python worker.py", "thread": None, "frames": [],
                 "error": "py-spy timed out after 10 s"},
            ],
        },
    )
    text = rendered(evidence_text(stall, UTC))
    assert "pid 4242  python train.py [red]x[/red]  (thread MainThread)" in text
    assert "  wait_in_all_reduce (train.py:88)" in text and "  step (train.py:120)" in text
    assert "py-spy timed out after 10 s" in text
    assert "stacks_file" in text and "[{" not in text  # not a repr in the numbers table
