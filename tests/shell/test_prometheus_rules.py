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
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dflash_watch.baseline.store import Baseline
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
        {"record": f"dashboard:query{i}", "expr": re.sub(r"\$\w+", ".*", e)} for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard_rules.yml").write_text(json.dumps(rules))
    r = _run(PROMTOOL, "check", "rules", "dashboard_rules.yml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(AMTOOL is None, reason="amtool not installed (Debian package prometheus-alertmanager)")
def test_the_alertmanager_example_is_valid_and_routes_critical_to_the_pager() -> None:
    r = _run(AMTOOL, "check-config", "alertmanager.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    for labels, receiver in ((["severity=critical", "instance=n1:9089"], "pager"),
                             (["severity=warning", "instance=n1:9089"], "chat")):
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


def test_every_rule_has_severity_annotations_a_runbook_that_exists_and_tests_both_ways() -> None:
    """Issue 18/19: ``runbook_url`` on every rule, pointing to a README
    anchor that is there; each alert has a promtool case where it fires
    and one where it must not."""
    rules = (DEPLOY / "rules.yml").read_text()
    readme = (DEPLOY.parents[1] / "README.md").read_text()
    tests = (DEPLOY / "rules_test.yml").read_text()
    blocks = re.split(r"\n\s+- alert: ", rules)[1:]
    assert len(blocks) >= 17
    quiet = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts: \[\]", tests))
    fires = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n", tests))
    for block in blocks:
        name = block.split()[0]
        for key in ("severity: ", "summary: ", "description: "):
            assert key in block, (name, key)
        anchor = re.search(r'runbook_url: "README\.md#([a-z-]+)"', block)
        assert anchor, name
        assert f'<a id="{anchor.group(1)}"></a>' in readme, (name, anchor.group(1))
        assert name in fires and name in quiet, (name, name in fires, name in quiet)
    # The training-health rules each say how long a condition must hold.
    health = rules.split("name: dflash-health", 1)[1]
    assert all("\n        for: " in b for b in re.split(r"\n\s+- alert: ", health)[1:])


def test_the_dashboard_filters_every_query_on_job_instance_and_run_and_gives_every_panel_a_unit() -> None:
    """Issue 18: a ``job``/``instance`` variable every query filters on, the
    ``run`` variable docs/prometheus.md promises, a unit on every panel."""
    dash = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert {"job", "instance", "run"} <= set(variables)
    assert variables["run"]["allValue"] == ".*"  # a scrape config without a run label still matches
    for panel in dash["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
        for target in panel["targets"]:
            selectors = re.findall(r"\b((?:dflash|process)_[a-z_]+)(\{[^}]*\})?", target["expr"])
            assert selectors, target["expr"]
            for name, labels in selectors:
                for var in ('job=~"$job"', 'instance=~"$instance"', 'run=~"$run"'):
                    assert var in labels, (panel["title"], name, target["expr"])
    # The new signals have panels.
    used = "\n".join(_dashboard_exprs())
    for name in ("dflash_training_loss", "dflash_grad_norm", "dflash_rank_step_seconds",
                 "dflash_gpu_temperature_celsius", "dflash_gpu_power_watts", "dflash_gpu_throttle",
                 "dflash_gpu_xid_total", "dflash_gpu_ecc_uncorrected_total"):
        assert name in used, name


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
    m.feed_samples([GpuSample(1.0e9, 0, 1, 2, temp_c=70.0, power_w=500.0, power_limit_w=700.0, sm_clock_mhz=1400.0,
                              sm_clock_max_mhz=1980.0, throttle=("thermal",), ecc_uncorrected=0, remap_pending=False,
                              retired_pages=0, pcie_gen=4, pcie_gen_max=5, pcie_width=16, pcie_width_max=16)])
    m.feed_text("train.log", "2026-11-29 10:00:00,000 - INFO - x - step 3/10 | loss 2.3 | 21.5 Ktok/s\n", 1, 1.0e9)
    # The detectors' issue-19 accessors, answering with every field (stand-ins
    # where a detector is not in the tree yet; the collector reads them by name).
    d = m.detectors
    d.loss_state = lambda: SimpleNamespace(loss=2.3, grad_norm=1.0, loss_scale=65536.0, time=1.0e9,  # type: ignore
                                           nan_total=0, overflow_total=0)
    d.rank_table = lambda: [SimpleNamespace(rank=0, gpu=0, step_seconds=1.0, compute_seconds=0.8,  # type: ignore
                                            wait_seconds=0.2, last_step=3, last_seen=1.0e9, slow=False, hung=False)]
    d.gpu_health = lambda: {0: SimpleNamespace(xid_total=1, last_xid=79, xid_counts={79: 1})}  # type: ignore
    names = _sample_names(m)
    # Each rate unit has its own name: a run (and a baseline) per unit.
    for unit, line in (("it/s", " 40%|####      | 3/10 [00:03<00:07,  3.25it/s]\n"),
                       ("samples/s", "2026-11-29 10:00:00,000 - INFO - x - step 3/10 | 48.5 samples/s\n")):
        other = Monitor()
        other.set_baseline(Baseline(3.5, {"throughput_unit": unit}))
        other.feed_text("train.log", line, 1, 1.0e9)
        names |= _sample_names(other)
    return names


def _sample_names(m: Monitor) -> set[str]:
    text = generate_latest(build_registry(m)).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}
