#!/usr/bin/env python3
"""Render the dashboard's main states to screenshots/*.svg and *.png.

Each state is a deterministic scene (``dflash_watch.tui.scenes``: real
parsers and detectors fed fixed data in UTC) shown by the real app under
``App.run_test``; the SVG comes from Textual's ``save_screenshot`` and the
PNG from headless Chromium rendering that SVG.

    python scripts/render_screenshots.py [--out screenshots] [--no-png] [STATE ...]

Needs chromium for PNGs (``apt-get install -y chromium``); without it the
SVGs are still written and the script says so.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_watch.tui.app import DashboardApp  # noqa: E402
from dflash_watch.tui.scenes import UTC, SceneJob, build, hand_started, scene_proc_info  # noqa: E402


@dataclass(frozen=True)
class State:
    name: str
    scene: str
    size: tuple[int, int]
    what: str
    keys: tuple[str, ...] = ()
    before: Callable[[DashboardApp], Awaitable[None]] | None = None
    adopt: bool = False  # the pane was started by hand: `r` offers a takeover


async def _select_first_alert(app: DashboardApp) -> None:
    app.query_one("#alerts").table.focus()


STATES = (
    State("healthy", "healthy", (120, 40), "8 GPUs flat, throughput at its baseline"),
    State("memory-volatility", "volatile", (120, 40),
          "drafter GPUs 5-7 stop being flat and throughput collapses (bucketing broke)"),
    State("crash", "crashed", (120, 40), "the FX-tracing crash: dead job, relaunch prompt"),
    State("evidence", "crashed", (120, 40), "Enter on the crash alert: traceback and remedy",
          keys=("down", "enter"), before=_select_first_alert),
    State("relaunch-confirm", "volatile", (120, 40), "r on a live job: the preflight before anything is killed",
          keys=("r",)),
    State("takeover-confirm", "crashed", (120, 40),
          "r on a crashed run started by hand in the pane: the pane, command and directory before the takeover",
          keys=("r",), adopt=True),
    State("filter", "volatile", (120, 40), "/ filters the log", keys=("slash", *"bucket", "enter")),
    State("compact-80x24", "volatile", (80, 24), "the same run in an 80x24 terminal"),
    State("help", "healthy", (120, 40), "? lists every key", keys=("question_mark",)),
    State("health", "health", (120, 40),
          "training health: a NaN loss marked on the loss chart, rank 2 the straggler, GPU 6 with Xid 48 and "
          "thermal throttling"),
    State("diagnosis", "demo", (120, 40),
          "d on the demo's broken-batching phase: what changed since the good run, most likely cause first",
          keys=("d",)),
)

async def render_svg(state: State, out: Path) -> Path:
    if state.scene == "demo":
        tmp = Path(tempfile.mkdtemp(prefix="dfw-shot-demo-"))
        try:
            from dflash_watch.demo.snapshot import replayed_demo

            snap = replayed_demo(tmp, tz=UTC)
            monitor, now, fingerprint, baseline = snap.monitor, snap.now, snap.fingerprint, snap.baseline_path
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        # The baseline's name, not its temporary folder: the picture is the same on every render.
        app = DashboardApp(monitor, job=None, tz=UTC, clock=lambda: now, bell_repeat_s=0,
                           fingerprint=fingerprint, baseline_path=Path(baseline).name)
    else:
        tmp = None
        scene = build(state.scene)
        job = SceneJob(scene.job_state, adoption=hand_started() if state.adopt else None)
        app = DashboardApp(scene.monitor, job=job, tz=UTC, clock=lambda: scene.now, bell_repeat_s=0,
                           proc_info=scene_proc_info)
    path = out / f"{state.name}.svg"
    async with app.run_test(size=state.size) as pilot:
        await pilot.pause(0.2)
        if state.before is not None:
            await state.before(app)
        for key in state.keys:
            await pilot.press(key)
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        app.save_screenshot(filename=path.name, path=str(out))
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def svg_size(svg: Path) -> tuple[int, int]:
    head = svg.read_text(encoding="utf-8")[:2000]
    m = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', head)
    if not m:
        return 1600, 1000
    return int(float(m.group(1)) + 0.5), int(float(m.group(2)) + 0.5)


def render_png(svg: Path, chromium: str) -> Path:
    png = svg.with_suffix(".png")
    width, height = svg_size(svg)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={png}",
             f"--window-size={width},{height}", svg.resolve().as_uri()],
            check=True, capture_output=True, timeout=120,
        )
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("states", nargs="*", help=f"states to render (default all: {', '.join(s.name for s in STATES)})")
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--no-png", action="store_true")
    args = parser.parse_args(argv)
    chosen = [s for s in STATES if not args.states or s.name in args.states]
    unknown = set(args.states) - {s.name for s in STATES}
    if unknown:
        print(f"unknown states: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    chromium = None if args.no_png else (shutil.which("chromium") or shutil.which("chromium-browser"))
    if not args.no_png and chromium is None:
        print("chromium not found: writing SVGs only (apt-get install -y chromium)", file=sys.stderr)
    for state in chosen:
        svg = asyncio.run(render_svg(state, out))
        line = f"{svg.relative_to(out.parent) if out.parent in svg.parents else svg}  {state.what}"
        if chromium:
            png = render_png(svg, chromium)
            line += f"  -> {png.name}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
