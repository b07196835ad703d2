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
