"""deploy/prometheus/ checked by the tools that will run it.

``promtool check rules`` and ``promtool test rules`` (Debian package
``prometheus``), ``amtool check-config`` (``prometheus-alertmanager``); and
every ``dflash_*`` name the rules and the Grafana dashboard use must be a
name our exporter really exposes, so a renamed metric breaks this test,
not a pager at 3 a.m.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dflash_watch.baseline import Baseline
from dflash_watch.control.state import JobState
from dflash_watch.metrics.collector import build_registry
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuSample

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")


def _run(*argv: str, cwd: Path = DEPLOY) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)


@needs_promtool
def test_promtool_checks_and_tests_the_rules() -> None:
    r = _run(PROMTOOL, "check", "rules", "rules.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    r = _run(PROMTOOL, "test", "rules", "rules_test.yml")
    assert r.returncode == 0, r.stdout + r.stderr


@needs_promtool
def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    """Each panel's PromQL, as a recording rule, through ``promtool check rules``."""
    exprs = _dashboard_exprs()
    assert len(exprs) >= 6
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": e.replace("$instance", ".*")} for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard_rules.yml").write_text(json.dumps(rules))
    r = _run(PROMTOOL, "check", "rules", "dashboard_rules.yml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(AMTOOL is None, reason="amtool not installed (Debian package prometheus-alertmanager)")
def test_the_alertmanager_example_is_valid_and_routes_critical_to_the_pager() -> None:
    r = _run(AMTOOL, "check-config", "alertmanager.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    for labels, receiver in ((["severity=critical", "instance=n1:9108"], "pager"),
                             (["severity=warning", "instance=n1:9108"], "chat")):
        r = _run(AMTOOL, "config", "routes", "test", "--config.file=alertmanager.yml", *labels)
        assert r.returncode == 0 and r.stdout.strip() == receiver, (labels, r.stdout, r.stderr)


def test_rules_and_dashboard_use_only_names_the_exporter_exposes() -> None:
    exposed = _exposed_names()
    texts = {"rules.yml": (DEPLOY / "rules.yml").read_text(), "dashboard": "\n".join(_dashboard_exprs())}
    used = {name for text in texts.values() for name in re.findall(r"\bdflash_[a-z_]+", text)}
    assert used - exposed == set(), f"not exposed: {used - exposed}"
    # The panels the issue asks for are there.
    assert {"dflash_gpu_memory_used_bytes", "dflash_throughput", "dflash_throughput_baseline",
            "dflash_alerts_firing", "dflash_last_progress_timestamp_seconds"} <= used


def _dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def _exposed_names() -> set[str]:
    """Every sample name of a Monitor that has seen everything the exporter shows."""

    class Full(Monitor):
        padding_efficiency = 0.9

    m = Full()
    m.set_baseline(Baseline(21500.0))
    m.set_job_state(JobState("running", "train", pid=1))
    m.feed_samples([GpuSample(1.0e9, 0, 1, 2)])
    m.feed_text("train.log", "2026-11-29 10:00:00,000 - INFO - x - step 3/10 | loss 2.3 | 21.5 Ktok/s\n", 1, 1.0e9)
    text = generate_latest(build_registry(m)).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}
