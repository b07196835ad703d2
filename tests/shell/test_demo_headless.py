"""`dflash-watch demo --no-tmux --headless`: the story without tmux or TUI.

The simulator runs as a child process of the demo (control limited); the
alerts of the story arrive as contract JSON lines, the demo ends when the
simulated job exits, and nothing of it is left behind.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_without_tmux_tells_the_story_and_cleans_up() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", "demo", "--no-tmux", "--headless", "--speed", "300", "--keep"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    kept = lines.pop()
    assert kept.startswith("dflash-watch demo: files kept in ")
    folder = Path(kept.rsplit(" ", 1)[1])
    try:
        alerts = [json.loads(line) for line in lines]
        order = [a["detector"] for a in alerts if a["state"] == "firing"]
        assert set(a["gpu"] for a in alerts if a["detector"] == "memory_volatility") == {5, 6, 7}
        assert order.index("throughput_drop") < order.index("fx_tracing") < order.index("process_exit")
        (exit_alert,) = [a for a in alerts if a["detector"] == "process_exit"]
        assert exit_alert["kind"] == "crash" and "RuntimeError" in exit_alert["message"]
        assert (folder / "train.log").is_file()
        # The simulator the demo started says its pid in the log's first line;
        # only that process is looked at (never the machine's process table).
        head = (folder / "train.log").read_text(encoding="utf-8").splitlines()[0]
        simulator = int(re.search(r"\(pid (\d+)\)", head).group(1))
    finally:
        subprocess.run(["rm", "-rf", str(folder)])
    try:
        with open(f"/proc/{simulator}/cmdline", "rb") as fh:
            still = str(folder).encode() in fh.read()
    except OSError:
        still = False
    assert not still, "the demo left its simulator running"
