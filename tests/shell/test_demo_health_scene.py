"""`--scene health` of the demo's simulator: the lines the training-health detectors read.

The simulator runs for real (--fast: no sleeping). Its files must hold a
real NaN loss line, rank-prefixed step lines, per-rank probe lines with
the step split, and GPU samples with the health fields (Xid 48, thermal
throttling), in the formats the real parsers read; the default scene
must write none of them (the seed's story is unchanged).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from dflash_watch.demo import health
from dflash_watch.monitor import Monitor
from dflash_watch.replay import replay
from dflash_watch.sources.samples import parse_sample_line

ROOT = Path(__file__).resolve().parents[2]
START = "1796000000"


def simulate(out: Path, *extra: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dflash_watch.demo.simulator", "--out", str(out), "--fast", "--seed", "7",
         "--quiet", "--start-time", START, *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # the story's first launch ends in its crash


def probe_files(out: Path) -> list[str]:
    return sorted(str(p) for p in out.glob("dflash-probe-*.jsonl"))


def test_health_scene_writes_nan_ranks_and_gpu_health(tmp_path: Path) -> None:
    simulate(tmp_path, "--scene", "health")
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    nan_lines = [line for line in log.splitlines() if "| loss nan |" in line]
    assert len(nan_lines) == health.NAN_STEPS
    assert all("[INFO] [dflash.train] step " in line for line in nan_lines)
    assert all(f"[rank{r}]: step " in log for r in range(3))
    samples = [s for s in map(parse_sample_line, (tmp_path / "gpu.jsonl").read_text().splitlines()) if s]
    xids = [s for s in samples if s.xid]
    assert [(s.gpu, s.xid) for s in xids] == [(health.HOT_GPU, (health.XID_CODE,))]
    assert any(s.throttle == ("thermal",) and s.gpu == health.HOT_GPU for s in samples)
    assert all(s.temp_c is not None and s.power_limit_w == health.POWER_LIMIT_W for s in samples)
    assert len(probe_files(tmp_path)) == 3
    slow = [json.loads(line) for line in (tmp_path / "dflash-probe-rank2.jsonl").read_text().splitlines()]
    assert all(p["rank"] == 2 and p["step_seconds"] > 0 for p in slow)
    rank0 = (tmp_path / "dflash-probe-rank0.jsonl").read_text().splitlines()
    assert any(math.isnan(json.loads(line).get("loss", 0.0)) for line in rank0)

    # Read by the real parsers and detectors: every health detector has its say.
    monitor = Monitor()
    replay([str(tmp_path / "train.log")], gpu_samples=[str(tmp_path / "gpu.jsonl")],
           probes=probe_files(tmp_path), monitor=monitor)
    fired = {(a.detector, a.kind) for a in monitor.alerts.history if a.state == "firing"}
    assert ("loss", "nan") in fired
    assert ("straggler", "slow") in fired
    assert ("gpu_health", "xid") in fired
    assert ("straggler", "hung") not in fired
    # The story is still told around them.
    assert {"throughput_drop", "memory_volatility", "fx_tracing"} <= {d for d, _ in fired}
    assert [r.rank for r in monitor.detectors.rank_table() if r.slow] == [health.SLOW_RANK]
    assert any(math.isnan(v) for _, _, v in monitor.loss_nonfinite)


def test_default_scene_writes_no_health_data(tmp_path: Path) -> None:
    simulate(tmp_path)
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    assert "loss nan" not in log and "[rank" not in log
    assert probe_files(tmp_path) == [str(tmp_path / "dflash-probe-rank0.jsonl")]
    first = json.loads((tmp_path / "gpu.jsonl").read_text().splitlines()[0])
    assert set(first) == {"time", "gpu", "used_bytes", "total_bytes", "util", "processes"}
