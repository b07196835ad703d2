"""The `d` screen: what changed since the good run, most likely cause first.

The scenes' Monitor has a baseline of 21.5 Ktok/s; the "volatile" scene's
last minutes break bucketing (pad_eff 0.93 -> 0.45, 4.3 Ktok/s, drafter
memory swinging). The screen must put padding first, show the staged
environment's differences, and draw log-borne text as text.
"""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console
from tui_helpers import make_app, scene

from dflash_watch.baseline.diagnose import Diagnosis, live_diagnosis
from dflash_watch.tui.screens.diagnosis import DiagnosisScreen, diagnosis_text

SIZE = (140, 45)


def _good_baseline(monitor, fingerprint=None):  # noqa: ANN001
    extra = {**monitor.baseline.extra, "padding_efficiency": 0.93}
    if fingerprint is not None:
        extra["fingerprint"] = fingerprint
    monitor.set_baseline(replace(monitor.baseline, extra=extra))


def test_broken_bucketing_ranks_padding_first_and_the_package_change_below_it():
    s = scene("volatile", minutes=20)
    _good_baseline(s.monitor, {"packages": {"transformers": "5.8.1", "accelerate": "1.12.0", "rich": "14.0"}})
    now = {"packages": {"transformers": "5.6.0", "rich": "14.0"}}
    diagnosis = live_diagnosis(s.monitor, lambda: now, "good.json")
    whats = [c["what"] for c in diagnosis.changes]
    assert whats[0] == "padding_efficiency", whats
    assert "package:transformers" in whats and "package:accelerate" in whats
    assert "package:rich" not in whats  # unchanged: not a change
    assert whats.index("package:transformers") > 0
    assert "throughput_drop" in diagnosis.symptoms and "memory_volatility" in diagnosis.symptoms
    first = diagnosis.changes[0]
    assert first["baseline"] == 0.93 and abs(first["now"] - 0.45) < 0.02
    assert "bucket boundaries" in first["next_step"]


def test_without_a_baseline_it_says_how_to_get_one():
    s = scene("volatile", minutes=20)
    s.monitor.set_baseline(None)
    diagnosis = live_diagnosis(s.monitor, lambda: None)
    assert diagnosis.changes == [] or not diagnosis.changes
    assert "no baseline yet" in diagnosis.note and "press b" in diagnosis.note


def test_text_from_packages_and_logs_is_drawn_as_text():
    d = Diagnosis("b.json", [{"what": "package:[bold]x[/]", "baseline": "1", "now": "\x1b[31m2",
                              "says": "[link=http://x]says[/link]", "next_step": "pip install [red]x[/red]"}],
                  symptoms=["throughput_drop"])
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    for part in diagnosis_text(d):
        console.print(part)
    rendered = console.export_text()
    assert "[bold]x[/]" in rendered and "[link=http://x]says[/link]" in rendered
    assert "\x1b" not in rendered


async def test_d_opens_the_screen_over_the_running_dashboard_and_esc_closes_it():
    app, s, job = make_app("volatile", minutes=20,
                           fingerprint=lambda: {"packages": {"transformers": "5.6.0"}})
    _good_baseline(s.monitor, {"packages": {"transformers": "5.8.1"}})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, DiagnosisScreen)
        shown = app.screen.diagnosis
        assert shown.changes[0]["what"] == "padding_efficiency"
        assert any(c["what"] == "package:transformers" for c in shown.changes)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DiagnosisScreen)
        assert set(job.calls) <= {"status"}  # looking never acts on the job


def test_the_demo_run_names_padding_first_in_its_alerts_and_on_d(tmp_path):
    """The demo's own data (staged environments, simulator output, replay):
    the slowdown's alert carries the suspects, padding first; `d` shows the
    package and cache differences and says the FX crash is not the cause."""
    from dflash_watch.demo.snapshot import replayed_demo

    snap = replayed_demo(tmp_path)
    history = list(snap.monitor.alerts.history)
    fired = {a.detector for a in history if a.state == "firing"}
    assert {"padding", "throughput_drop", "fx_tracing", "alloc_thrash"} <= fired, fired
    drop = next(a for a in history if a.detector == "throughput_drop" and a.state == "firing")
    suspects = drop.evidence.get("suspects")
    assert suspects and suspects[0]["what"] == "padding_efficiency", suspects
    diagnosis = live_diagnosis(snap.monitor, snap.fingerprint, snap.baseline_path)
    whats = [c["what"] for c in diagnosis.changes]
    assert whats[0] == "padding_efficiency", whats
    for what in ("package:transformers", "package:accelerate", "torch_build", "compile_cache", "crash:fx_tracing"):
        assert what in whats, (what, whats)
    fx = next(c for c in diagnosis.changes if c["what"] == "crash:fx_tracing")
    assert "explains a crash, not a slowdown" in fx["says"]
    cache = next(c for c in diagnosis.changes if c["what"] == "compile_cache")
    assert "slow first steps, not a steady drop" in cache["says"]


async def test_the_open_screen_follows_the_run():
    """Open before the slowdown's cause shows, the screen updates in place."""
    app, s, job = make_app("volatile", minutes=20, fingerprint=lambda: None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        s.monitor.set_baseline(None)
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiagnosisScreen) and "no baseline yet" in screen.diagnosis.note
        _good_baseline_from_scratch(s.monitor)
        screen._refresh()  # what the screen's timer does every few seconds
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is screen and screen.diagnosis.changes[0]["what"] == "padding_efficiency"


def _good_baseline_from_scratch(monitor):  # noqa: ANN001
    from dflash_watch.baseline.store import Baseline

    monitor.set_baseline(Baseline(21_500.0, {"padding_efficiency": 0.93}))


def _screen_text(parts) -> str:
    console = Console(width=260, record=True, file=io.StringIO(), color_system=None)
    for part in parts:
        console.print(part)
    return console.export_text()


async def test_d_never_calls_a_resolved_alert_firing():
    """Padding and the slowdown resolved (healthy lines again); memory still swings."""
    from dflash_watch.tui.scenes import LOG, _line

    app, s, job = make_app("volatile", minutes=20, fingerprint=lambda: None)
    m = s.monitor
    n = m.lines[LOG][-1][0] + 1
    t = s.now
    for k in range(60):
        t += 3
        m.feed_text(LOG, _line(t, "INFO", "dflash.train", f"step {2000 + k}/50000 | loss 2.0 | 22.5 Ktok/s | "
                                                          "pad_eff 0.93 | lr 2e-4") + "\n", n + k, t)
    firing = {a.detector for a in m.alerts.firing()}
    assert "padding" not in firing and "memory_volatility" in firing
    assert any(a.detector == "padding" and a.state == "resolved" for a in m.alerts.history)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiagnosisScreen)
        text = _screen_text(diagnosis_text(screen.diagnosis, screen.firing))
        assert "the padding alert is firing" not in text
        assert "padding (resolved)" in text and "memory_volatility (firing)" in text
        assert "the padding alert fired this session, resolved since" in text


def test_d_gives_the_compile_cache_one_size():
    s = scene("volatile", minutes=20)
    _good_baseline(s.monitor, {"compile_cache": {"path": "/c", "bytes": 353_000_000, "entries": 1200}})
    diagnosis = live_diagnosis(s.monitor, lambda: {"compile_cache": {"path": "/c", "bytes": 925_000, "entries": 3}})
    assert any(c["what"] == "compile_cache" for c in diagnosis.changes)
    text = _screen_text(diagnosis_text(diagnosis))
    import re

    sizes = set()
    for line in text.splitlines():
        if "compile" in line or "cache" in line:
            sizes |= {m.group(0) for m in re.finditer(r"\d+(?:\.\d+)? ?(?:[KMG]i?B)\b", line)}
    assert sizes == {"353 MB", "925 KB"}, sizes
