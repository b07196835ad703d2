"""A real gradient-accumulation log replays to one throughput_drop, at its drop.

``tests/fixtures/throughput_series/grad_accum_tqdm.log`` is the unedited
output of ``grad_accum_tqdm.py`` beside it (run once, PYTHONUNBUFFERED
unset): a tqdm bar counting micro-batches (tok/s in its postfix) and
``logging`` lines counting optimizer steps (Ktok/s), four micro-batches a
step, the rate halving ``DROP_AT_S`` seconds in. Read as one step count
the log lines went "back" and the detector restarted again and again (and
took the bar's other total for another loop), judging the run only in
warm-ups; read as two series it learns the rate once and fires once,
within the budget (90-120 s after the drop), never before it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "fixtures" / "throughput_series"
LOG = FOLDER / "grad_accum_tqdm.log"
SCRIPT = FOLDER / "grad_accum_tqdm.py"


def _script_constant(name: str) -> float:
    m = re.search(rf'^{name} = float\(os\.environ\.get\("{name}", "([0-9.]+)"\)\)$', SCRIPT.read_text(), re.M)
    assert m, name
    return float(m.group(1))


def _first_stamp() -> float:
    """The run's start: the stamp of its first line (logged just before the loop's clock starts)."""
    first = LOG.read_text(encoding="utf-8").split("\n", 1)[0]
    stamp = datetime.datetime.strptime(first[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=datetime.UTC)
    return stamp.timestamp()


@pytest.fixture(scope="module")
def alerts() -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    out = subprocess.run(
        [sys.executable, "-m", "dflash_watch", "replay", "--json", "--tz", "UTC", str(LOG)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_the_log_holds_both_series() -> None:
    text = LOG.read_text(encoding="utf-8")
    bars = re.findall(r"Training: .*\| (\d+)/(\d+) \[.*tok/s=\d+\]$", text, re.M)
    lines = re.findall(r" - train - step (\d+)/(\d+) \| .* Ktok/s ", text)
    assert len(bars) > 50 and len(lines) > 200
    # The bar counts micro-batches: far ahead of the optimizer steps, with another total.
    assert int(bars[-1][0]) > 3 * int(lines[-1][0])
    assert bars[0][1] != lines[0][1]


def test_one_throughput_drop_fires_at_the_drop_and_none_before(alerts: list[dict[str, object]]) -> None:
    drop = _first_stamp() + _script_constant("DROP_AT_S")
    fired = [a for a in alerts if a["detector"] == "throughput_drop"]
    assert len(fired) == 1, fired  # no firing before the drop, none other after it
    assert fired[0]["state"] == "firing"
    (alert,) = fired
    delay = float(alert["time"]) - drop  # type: ignore[arg-type]
    assert 90.0 <= delay <= 125.0, delay
    evidence = alert["evidence"]
    assert isinstance(evidence, dict)
    assert abs(float(evidence["since"]) - drop) <= 15.0, evidence["since"]
    assert evidence["baseline_source"] == "learned"
    assert 7000 <= float(evidence["baseline_tokens_per_s"]) <= 9000  # ~8.2 Ktok/s before the drop
    assert float(evidence["below_fraction"]) >= 0.4  # the rate halved
