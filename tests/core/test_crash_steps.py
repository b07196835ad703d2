"""The two crash detectors of a set share one record of the step lines.

``build_detectors`` gives ``fx_tracing`` and ``crash`` one ``StepLines``;
a step line is recorded once whichever of the two sees it first (or is in
the set at all), and ``crash`` reads the same lines when a crash comes (its
restart and survival verdicts). A detector made alone still records its own.
"""

from __future__ import annotations

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.crash import CrashDetector
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.events import Crash, Progress


def _crash_pair(ds: DetectorSet) -> tuple[CrashDetector, CrashDetector]:
    fx, crash = ds.get("fx_tracing"), ds.get("crash")
    assert isinstance(fx, CrashDetector) and isinstance(crash, CrashDetector)
    return fx, crash


def test_a_set_records_each_step_line_once_for_both() -> None:
    ds = DetectorSet(build_detectors(DetectorConfig()))
    fx, crash = _crash_pair(ds)
    for i in range(3):
        ds.update(Progress(10.0 + i, f"train.log:{i + 1}", step=i, rank=0))
    assert fx._progress is crash._progress
    assert list(crash._progress[("train.log", 0)]) == [(1, 0, 10.0), (2, 1, 11.0), (3, 2, 12.0)]


def test_a_detector_alone_records_its_own_lines() -> None:
    det = CrashDetector(DetectorConfig())
    det.update(Progress(5.0, "a.log:4", step=7, rank=None))
    assert list(det._progress[("a.log", None)]) == [(4, 7, 5.0)]


def test_a_relaunch_between_two_crashes_is_seen_through_the_shared_lines() -> None:
    """The same traceback twice with a relaunch (steps from 0 again) between:
    two incidents, read from the lines fx_tracing recorded for crash."""
    ds = DetectorSet(build_detectors(DetectorConfig()))
    out = []

    def crash(t: float, line: int) -> Crash:
        return Crash(t, f"train.log:{line}", detector="crash", kind="cuda_error", exc_type="RuntimeError",
                     message="CUDA error: an illegal memory access", signature="RuntimeError@train.py:10", rank=0)

    for i in range(5):
        out += ds.update(Progress(10.0 + i, f"train.log:{i + 1}", step=100 + i, rank=0))
    out += ds.update(crash(15.0, 6))
    for i in range(3):
        out += ds.update(Progress(16.0 + i, f"train.log:{7 + i}", step=i, rank=0))
    out += ds.update(crash(19.0, 10))
    out += ds.flush()
    assert [(a.detector, a.state) for a in out] == [("crash", "firing"), ("crash", "firing")]


def test_a_set_without_fx_tracing_still_records_the_step_lines_for_crash() -> None:
    """A set filtered to ``crash`` (a config or a test that keeps only some
    detectors) must not lose the lines ``fx_tracing`` would have recorded."""
    ds = DetectorSet([d for d in build_detectors(DetectorConfig()) if d.name != "fx_tracing"])
    crash = ds.get("crash")
    assert isinstance(crash, CrashDetector)
    for i in range(3):
        ds.update(Progress(10.0 + i, f"train.log:{i + 1}", step=i, rank=0))
    assert list(crash._progress[("train.log", 0)]) == [(1, 0, 10.0), (2, 1, 11.0), (3, 2, 12.0)]
