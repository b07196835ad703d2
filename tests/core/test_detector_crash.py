"""crash / fx_tracing: one alert per crash across ranks; process_exit one-shots."""

from __future__ import annotations

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.crash import CrashDetector
from dflash_watch.detectors.process_exit import ProcessExitDetector
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.events import Crash, Frame, ProcessExit, Tick
from tests.core.synthetic import T0, drive, oom_crash


def test_the_same_oom_from_8_ranks_is_one_alert_stamped_with_the_first_traceback():
    scenario = oom_crash(T0 + 100.0)
    ds = DetectorSet(build_detectors(DetectorConfig(tz="UTC")))
    alerts = drive(ds, scenario.events)
    # Held for the other ranks' copies until the data moves on or ends.
    assert alerts == []
    alerts = ds.flush()
    assert len(alerts) == 1
    (alert,) = alerts
    assert (alert.detector, alert.state, alert.severity, alert.kind) == ("crash", "firing", "critical", "cuda_oom")
    assert alert.time == T0 + 100.0
    assert alert.message.startswith("CUDA out of memory on rank 0: tried to allocate 160.00 MiB")
    assert "drafter.py:88" in alert.message
    ev = alert.evidence
    assert ev["exc_type"] == "torch.OutOfMemoryError" and ev["count"] == 8 and ev["ranks"] == list(range(8))
    assert ev["frames"][-1] == "/workspace/dflash/drafter.py:88 in forward"
    assert "Traceback" in ev["traceback"]
    (episode,) = ds.crash_episodes()
    assert episode.ranks == tuple(range(8)) and episode.count == 8
    assert episode.alert is alert and episode.first_time == T0 + 100.0


def test_the_same_signature_later_is_a_new_alert_and_different_signatures_both_fire():
    det = CrashDetector(DetectorConfig(), name="crash")
    a = drive(DetectorSet([det]), oom_crash(T0).events, until=T0 + 10)
    b = drive(DetectorSet([det]), oom_crash(T0 + 600.0).events)
    assert len(a) == 1 and b == []
    other = Crash(T0 + 600.5, "other.log:7", "crash", "missing_module", "ModuleNotFoundError",
                  "No module named 'flash_attn'", "ModuleNotFoundError @ a.py:f", rank=3, frames=(Frame("a.py", 1, "f"),))
    assert det.update(other) == []
    # The next event past the hold releases both, oldest first.
    b = det.update(Tick(T0 + 606.0))
    assert [x.kind for x in b] == ["cuda_oom", "missing_module"]
    c = b[1]
    assert c.message.startswith("missing Python module on rank 3: ModuleNotFoundError")
    assert [e.count for e in det.episodes()] == [8, 8, 1]


def test_an_nccl_timeout_right_after_an_oom_is_part_of_that_incident():
    det = CrashDetector(DetectorConfig(), name="crash")
    drive(DetectorSet([det]), oom_crash(T0).events)
    other = Crash(T0 + 0.5, "log:7", "crash", "nccl_timeout", "torch.distributed.DistBackendError",
                  "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 ms",
                  "nccl@x", rank=9)
    assert det.update(other) == []
    (alert,) = det.update(Tick(T0 + 6.0))
    assert alert.kind == "cuda_oom" and alert.evidence["ranks"] == list(range(8)) + [9]
    assert [x["kind"] for x in alert.evidence["collateral"]] == ["nccl_timeout"]


def test_fx_tracing_carries_the_explanation_and_remedies_and_is_not_a_plain_crash():
    fx = Crash(T0, "train.log:88", "fx_tracing", "fx_tracing", "RuntimeError",
               "Detected that you are using FX to symbolically trace a dynamo-optimized function. This is not supported at the moment.",
               "RuntimeError@_symbolic_trace.py:trace", rank=1,
               frames=(Frame("/torch/fx/_symbolic_trace.py", 817, "trace"),))
    ds = DetectorSet(build_detectors())
    assert ds.update(fx) == []
    (alert,) = ds.update(Tick(T0 + 5.0))
    assert alert.time == T0
    assert alert.detector == "fx_tracing" and alert.severity == "critical" and alert.kind is None
    assert alert.message.startswith("FX symbolic tracing collided with torch.compile on rank 1: RuntimeError: Detected")
    first, _, rest = alert.message.partition("\n")
    assert "(in trace, _symbolic_trace.py:817)" in first
    assert rest == alert.evidence["remedy"] and rest  # parsers.remedies explains it


def test_killed_message_names_the_cause():
    c = Crash(T0, "slurm.log:3", "crash", "killed", "SIGTERM", "*** JOB 123 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***",
              "slurm_time_limit", cause="slurm_time_limit")
    (alert,) = CrashDetector(DetectorConfig(crash_hold_s=0)).update(c)
    assert alert.message.startswith("training killed from outside (slurm time limit): *** JOB 123 CANCELLED")


def test_process_exit_one_shots():
    det = ProcessExitDetector()
    (crash,) = det.update(ProcessExit(T0, "crash", code=1, signature="torch.OutOfMemoryError@x"))
    (killed,) = det.update(ProcessExit(T0 + 1, "killed", signal=9))
    (clean,) = det.update(ProcessExit(T0 + 2, "clean", code=0))
    assert (crash.severity, crash.kind, crash.state) == ("critical", "crash", "firing")
    assert crash.message == "training process crashed (exit code 1); last error: torch.OutOfMemoryError@x"
    assert killed.message == "training process killed by SIGKILL (signal 9)" and killed.severity == "critical"
    assert clean.severity == "info" and clean.message == "training process exited cleanly (exit code 0)"
    assert crash.to_dict()["evidence"] == {"code": 1, "signal": None, "signature": "torch.OutOfMemoryError@x"}
