"""The live session's automatic baseline: saved from a healthy run, never from a sick one."""

from __future__ import annotations

import json

from dflash_watch.baseline.auto import AutoBaseline
from dflash_watch.baseline.saver import AutoBaselineSaver
from dflash_watch.tui.scenes import build


def test_a_healthy_run_is_saved_with_its_environment_and_said_in_a_notice(tmp_path):
    scene = build("healthy", minutes=20)
    scene.monitor.fingerprint = {"packages": {"transformers": "5.8.1"}}
    policy = AutoBaseline.for_session(tmp_path, "dflash-train", healthy_for_s=600.0)
    saver = AutoBaselineSaver(scene.monitor, policy)
    assert saver.look() is None and policy.reason == "not healthy for long enough yet"
    policy.healthy_since = scene.monitor.now - 700.0  # as if the looks had gone on for 700 s
    path = saver.look()
    assert path is not None and path.endswith("baseline-dflash-train.json")
    saved = json.loads((tmp_path / "baseline-dflash-train.json").read_text())
    assert saved["auto_saved"] is True and 21_000 < saved["throughput_tokens_per_s"] < 24_000
    assert saved["fingerprint"] == {"packages": {"transformers": "5.8.1"}}
    assert any("baseline saved automatically" in n for n in scene.monitor.notices)


def test_a_run_with_alerts_firing_is_never_saved(tmp_path):
    scene = build("volatile", minutes=20)
    policy = AutoBaseline.for_session(tmp_path, "dflash-train", healthy_for_s=0.0)
    assert AutoBaselineSaver(scene.monitor, policy).look() is None
    assert not (tmp_path / "baseline-dflash-train.json").exists()
    assert policy.reason == "alerts are firing"


def test_an_info_alert_neither_keeps_the_automatic_save_back_nor_blocks_the_b_key(tmp_path):
    """One rule (``guard.against_health``): an info alert (a run stopped as
    asked, a clean exit) says nothing about the run's health; a warning does,
    for the automatic save and the `b` key alike."""
    from dflash_watch.baseline.guard import refusal
    from dflash_watch.detectors.base import Alert

    scene = build("healthy", minutes=20)
    monitor = scene.monitor
    now = monitor.now
    monitor.raise_alert(Alert(now, "process_exit", "firing", "info", "training process stopped as asked (abort)",
                              "dflash-watch", kind="aborted"))
    assert [a.severity for a in monitor.alerts.firing()] == ["info"]
    assert refusal(monitor) is None
    policy = AutoBaseline.for_session(tmp_path, "dflash-train", healthy_for_s=600.0)
    policy.healthy_since = now - 700.0
    assert policy.consider(monitor, now) is not None, policy.reason

    monitor.raise_alert(Alert(now, "memory_volatility", "firing", "warning", "gpu 5 swings", "gpu5", gpu=5))
    assert "alerts fired in the last 10 min (memory_volatility gpu5)" in (refusal(monitor) or "")
    again = AutoBaseline.for_session(tmp_path / "again", "dflash-train", healthy_for_s=600.0)
    again.healthy_since = now - 700.0
    assert again.consider(monitor, now) is None and again.reason == "alerts are firing"
