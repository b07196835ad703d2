"""One incident, one alert: torchrun cascades, Quiet, caught tracebacks,
new crash kinds and the job-exit alert, on real torch 2.13 output captured
in tests/fixtures/tracebacks/ (tests/shell/test_real_torch_tracebacks.py
makes them afresh) and on hand-made events."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dflash_watch.detectors.config import DetectorConfig
from dflash_watch.detectors.crash import SURVIVE_WINDOW_S as W
from dflash_watch.detectors.crash import CrashDetector
from dflash_watch.detectors.process_exit import ProcessExitDetector
from dflash_watch.detectors.registry import DetectorSet, build_detectors
from dflash_watch.parsers.events import Crash, Frame, ProcessExit, Progress, Quiet, Tick
from dflash_watch.parsers.stream import LogStream
from tests.core.synthetic import T0, drive

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"


def events_of(name: str, chunk_lines: int | None = None, quiet: bool = False, pause=None) -> list:
    """The fixture through a LogStream, whole or in chunks; with ``quiet`` a
    Quiet after every chunk. ``pause(line)``: the writer paused after that
    line, so live the log went quiet there and the Monitor flushed the
    parser before sending the Quiet (``Monitor.quiet``)."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
    stream = LogStream(name)
    out: list = []
    last = T0
    chunk: list[str] = []
    first = 1

    def send(pause_here: bool) -> None:
        nonlocal last, first, chunk
        if chunk:
            events = stream.feed("".join(chunk), first, T0)
            out.extend(events)
            last = max([last] + [e.time for e in events])
            first += len(chunk)
            chunk = []
        if pause_here:
            out.extend(stream.flush(last))
        if pause_here or quiet:
            out.append(Quiet(last, last))

    for line in lines:
        chunk.append(line)
        paused = pause is not None and pause(line)
        if paused or (chunk_lines and len(chunk) >= chunk_lines):
            send(paused)
    send(False)
    out.extend(stream.flush(last))
    return out


def alerts_of(events: list, config: DetectorConfig | None = None) -> list:
    ds = DetectorSet(build_detectors(config or DetectorConfig()))
    found = drive(ds, events)
    return [a for a in found + ds.flush() if a.detector in ("crash", "fx_tracing")]


def verdicts(alerts: list) -> list:
    return [(a.detector, a.severity, a.kind, a.source, a.message) for a in alerts]


# -- a torchrun cascade is one alert --------------------------------------------


@pytest.mark.parametrize(
    ("name", "stopped", "reaped"),
    [
        ("torchrun_gloo_cascade_rank1_raises_torch2.13.0.txt", "0,2", 1),
        # The same job, where rank 0's own error (its peer closed the
        # connection) ended it before torchrun reaped rank 1: torchrun stops
        # only rank 2, and its report names rank 0 as the root cause (the
        # first it reaped). Our alert still names rank 1, whose error came first.
        ("torchrun_gloo_cascade_rank1_raises_peer_exits_first_torch2.13.0.txt", "2", 0),
    ],
)
def test_real_torchrun_cascade_is_one_alert_naming_the_root_rank(name: str, stopped: str, reaped: int) -> None:
    (alert,) = alerts_of(events_of(name))
    assert (alert.severity, alert.kind, alert.evidence["rank"]) == ("critical", "exception", 1)
    assert alert.message.startswith("RuntimeError on rank 1: rank 1 exploded")
    assert alert.source == f"{name}:11"
    ev = alert.evidence
    assert ev["ranks"] == [0, 1, 2]
    causes = [c["cause"] for c in ev["collateral"]]
    assert causes.count("peer_failure") == 2 and causes.count("torchrun_stopping") == len(stopped.split(","))
    assert "child_exit" in causes and "child_failed" in causes
    assert "Connection closed by peer" in next(c["message"] for c in ev["collateral"] if c["cause"] == "peer_failure")
    assert ev["report"]["rank"] == reaped and f"root cause rank {reaped}" in ev["report"]["message"]
    # The siblings torchrun stopped itself are named as such, never "killed".
    assert f"stopped by torchrun (SIGTERM): ranks {stopped}" in ev["report"]["message"]
    assert all(c["kind"] != "killed" for c in ev["collateral"])


def test_cascade_verdict_is_the_same_in_chunks_with_quiet_as_in_one_piece() -> None:
    name = "torchrun_gloo_cascade_rank1_raises_torch2.13.0.txt"
    whole = verdicts(alerts_of(events_of(name)))
    for chunk in (1, 3, 7, 20):
        assert verdicts(alerts_of(events_of(name, chunk, quiet=True))) == whole, chunk
        assert verdicts(alerts_of(events_of(name, chunk))) == whole, chunk
    # Live, the log pauses after the ranks' tracebacks (the agent waits for
    # the exits) and after the agent's lines: parser flushed, Quiet sent.
    paused = events_of(name, pause=lambda line: line.startswith("[rank1]: RuntimeError") or "closed by peer" in line or "SIGTERM" in line)
    assert verdicts(alerts_of(paused)) == whole


def test_consequences_first_then_the_root_cause_names_the_incident() -> None:
    peer = Crash(T0, "rank0.log:20", "crash", "exception", "RuntimeError", "Connection closed by peer [127.0.0.1]:1",
                 "RuntimeError @ c10d.py:wait", rank=0, cause="peer_failure", frames=(Frame("c10d.py", 1, "wait"),))
    root = Crash(T0 + 0.3, "rank1.log:11", "crash", "cuda_oom", "torch.OutOfMemoryError", "CUDA out of memory.",
                 "OutOfMemoryError @ m.py:f", rank=1, frames=(Frame("m.py", 3, "f"),))
    det = CrashDetector(DetectorConfig())
    assert det.update(peer) == [] and det.update(root) == []
    (alert,) = det.update(Tick(T0 + 10))
    assert (alert.kind, alert.source, alert.evidence["ranks"]) == ("cuda_oom", "rank1.log:11", [0, 1])
    assert [c["cause"] for c in alert.evidence["collateral"]] == ["peer_failure"]


def test_a_rank_traceback_read_after_the_agents_report_is_still_its_root() -> None:
    """A rank's traceback is held until its end is known, so torch elastic's
    lines printed after it (closing signals, the report) can reach the
    detector first; the traceback earlier in the file is still the root."""
    def crash(line: int, cause: str | None, exc: str = "RuntimeError") -> Crash:
        return Crash(T0, f"train.log:{line}", "crash", "exception", exc, f"m{line}", f"{exc} @ s{line}.py:f", rank=1,
                     cause=cause, frames=(Frame(f"s{line}.py", 1, "f"),))

    det = CrashDetector(DetectorConfig())
    for c in (crash(30, "torchrun_stopping", "torchrun"), crash(50, "child_failed", "errors.ChildFailedError"),
              crash(11, None)):
        assert det.update(c) == []
    # The next stage's crash, printed after that report, is an incident of its own.
    assert det.update(crash(60, None, "FileNotFoundError")) == []
    alert, second = det.update(Tick(T0 + 10))
    assert alert.source == "train.log:11" and alert.evidence["report"]["source"] == "train.log:50"
    assert second.source == "train.log:60" and second.evidence["report"] is None
    # A report alone, then a crash printed after it: two incidents.
    det = CrashDetector(DetectorConfig())
    det.update(crash(50, "child_failed", "errors.ChildFailedError"))
    det.update(crash(60, None, "FileNotFoundError"))
    assert [a.source for a in det.update(Tick(T0 + 10))] == ["train.log:50", "train.log:60"]


def test_copies_after_the_alert_update_the_episode_without_a_new_alert() -> None:
    def oom(t: float, rank: int) -> Crash:
        return Crash(t, f"rank{rank}.log:5", "crash", "cuda_oom", "torch.OutOfMemoryError", f"CUDA out of memory. GPU {rank}",
                     "OutOfMemoryError @ m.py:f", rank=rank, frames=(Frame("m.py", 3, "f"),))

    det = CrashDetector(DetectorConfig())
    det.update(oom(T0, 0))
    (alert,) = det.update(Tick(T0 + 5))
    assert alert.evidence["ranks"] == [0]
    assert det.update(oom(T0 + 20, 3)) == [] and det.update(Tick(T0 + 40)) == []
    (episode,) = det.episodes()
    assert episode.ranks == (0, 3) and episode.count == 2 and episode.alert is alert


def test_weak_agent_lines_alone_are_no_alert() -> None:
    line = Crash(T0, "log:3", "crash", "exception", "torchrun", "Sending process 9 closing signal SIGTERM", "x",
                 cause="torchrun_stopping")
    det = CrashDetector(DetectorConfig())
    assert det.update(line) == [] and det.update(Tick(T0 + 60)) == [] and det.flush() == []


# -- Quiet ----------------------------------------------------------------------


def test_quiet_sends_a_sealed_incident_at_once_but_not_an_undecided_traceback() -> None:
    name = "torchrun_gloo_cascade_rank1_raises_torch2.13.0.txt"
    events = events_of(name)
    det = CrashDetector(DetectorConfig())
    for e in events:
        assert det.update(e) == []
    last = max(e.time for e in events)
    (alert,) = det.update(Quiet(last + 0.5, last))
    assert alert.kind == "exception" and det.deadline() is None
    # A lone traceback might still be followed by progress: Quiet leaves its hold alone.
    tb = Crash(last + 100, "t.log:50", "crash", "exception", "ValueError", "bad", "ValueError @ a.py:f",
               frames=(Frame("a.py", 1, "f"),))
    det.update(tb)
    assert det.deadline() == last + 105  # the rank-merge hold
    assert det.update(Quiet(last + 100 + 0.8 * W, last + 100)) == []
    assert det.deadline() == last + 100 + W  # the copies are in; the survival window is not over
    (late,) = det.update(Tick(last + 100 + W))
    assert late.severity == "critical"
    # A Quiet after the window sends it at once.
    det.update(Crash(last + 200, "t.log:90", "crash", "exception", "KeyError", "k", "KeyError @ a.py:g",
                     frames=(Frame("a.py", 2, "g"),)))
    (now,) = det.update(Quiet(last + 201.5, last + 200))
    assert now.kind == "exception" and now.evidence["exc_type"] == "KeyError"


# -- caught tracebacks ---------------------------------------------------------


def test_a_traceback_the_program_survived_is_one_warning() -> None:
    name = "caught_logging_exception_python3.11.txt"
    (alert,) = alerts_of(events_of(name))
    assert (alert.severity, alert.kind) == ("warning", "exception")
    assert alert.message.startswith("caught and survived (training went on): ConnectionError")
    # Steps 3 and 4 went on after the first traceback (one line could be
    # tqdm's last redraw of a dying process).
    assert alert.evidence["survived"] == f"{name}:11"
    for chunk in (1, 2, 5):
        assert verdicts(alerts_of(events_of(name, chunk, quiet=True))) == verdicts([alert])
    # Live, the program pauses after each step line and after each traceback.
    paused = events_of(name, pause=lambda line: "tok/s" in line or line.startswith("ConnectionError"))
    assert verdicts(alerts_of(paused)) == verdicts([alert])


def test_survived_repeats_over_days_stay_one_episode_and_firing_stays_bounded() -> None:
    det = CrashDetector(DetectorConfig())
    alerts = []
    for day in range(200):
        t = T0 + day * 3600.0
        line = 1000 * day
        alerts += det.update(Progress(t - 1, f"t.log:{line}", step=day * 10))
        alerts += det.update(Crash(t, f"t.log:{line + 5}", "crash", "exception", "ConnectionError", f"retry {day}",
                                   "ConnectionError @ wandb.py:upload", frames=(Frame("wandb.py", 9, "upload"),)))
        alerts += det.update(Progress(t + 0.4 * W, f"t.log:{line + 8}", step=day * 10 + 1))
        alerts += det.update(Progress(t + 0.8 * W, f"t.log:{line + 9}", step=day * 10 + 2))
        alerts += det.update(Tick(t + 10))
    assert [a.severity for a in alerts] == ["warning"]
    (episode,) = det.episodes()
    assert episode.survived and episode.count == 200
    # Distinct caught tracebacks: a bounded number of warnings however many come.
    for i in range(100):
        t = T0 + 10 ** 6 + i * 100.0
        det.update(Crash(t, f"u.log:{10 * i + 1}", "crash", "exception", "KeyError", "k", f"KeyError @ f{i}.py:g",
                         frames=(Frame(f"f{i}.py", 1, "g"),)))
        det.update(Progress(t + 0.4 * W, f"u.log:{10 * i + 2}", step=10 * i + 1))
        det.update(Progress(t + 0.8 * W, f"u.log:{10 * i + 3}", step=10 * i + 2))
        alerts += det.update(Tick(t + 10))
    assert len(alerts) == 32 and {a.severity for a in alerts} == {"warning"}


def test_a_caught_traceback_in_a_slow_run_is_learned_and_its_repeats_fold() -> None:
    """Steps of 30 s: the first one is critical (nothing followed within the
    window), but its stream went on, so the repeats add to that episode."""
    det = CrashDetector(DetectorConfig())
    alerts = []
    for i in range(50):
        t = T0 + i * 600.0
        line = 100 * i
        alerts += det.update(Progress(t - 5, f"t.log:{line}", step=10 * i))
        alerts += det.update(Crash(t, f"t.log:{line + 5}", "crash", "exception", "ConnectionError", "retry",
                                   "ConnectionError @ wandb.py:upload", frames=(Frame("wandb.py", 9, "upload"),)))
        alerts += det.update(Tick(t + 5))
        alerts += det.update(Progress(t + 30, f"t.log:{line + 8}", step=10 * i + 1))
        alerts += det.update(Progress(t + 60, f"t.log:{line + 9}", step=10 * i + 2))
        alerts += det.update(Tick(t + 400))
    assert [a.severity for a in alerts] == ["critical"]
    (episode,) = det.episodes()
    assert episode.survived and episode.count == 50
    # The same error once more, and this time nothing follows: that one is reported.
    t = T0 + 10 ** 6
    det.update(Progress(t - 5, "t.log:99000", step=10_000))
    det.update(Crash(t, "t.log:99005", "crash", "exception", "ConnectionError", "retry",
                     "ConnectionError @ wandb.py:upload", frames=(Frame("wandb.py", 9, "upload"),)))
    assert det.update(Tick(t + 60)) == []  # a known caught one waits longer for its progress
    (last,) = det.update(Tick(t + 301))
    assert last.severity == "critical"


def test_progress_after_the_survival_window_is_not_survival_though_the_hold_is_longer() -> None:
    # Held 5 s for the ranks' copies, but only 1 s of data time decides: a live
    # Quiet (0.2-0.8 s of silence) may come in between and must not change it.
    det = CrashDetector(DetectorConfig())
    det.update(Progress(T0 - 1, "t.log:8", step=70))
    det.update(Crash(T0, "t.log:20", "crash", "exception", "KeyError", "k", "KeyError @ a.py:f",
                     frames=(Frame("a.py", 1, "f"),)))
    det.update(Progress(T0 + 2, "t.log:21", step=71))
    det.update(Progress(T0 + 3, "t.log:22", step=72))
    (alert,) = det.update(Tick(T0 + 5))
    assert alert.severity == "critical"


def test_one_progress_line_after_a_fatal_traceback_is_not_survival() -> None:
    """tqdm redraws its bar once more when the dying process closes it."""
    det = CrashDetector(DetectorConfig())
    det.update(Progress(T0 - 1, "t.log:8", step=70))
    det.update(Crash(T0, "t.log:72", "crash", "exception", "IndexError", "index out of range in self",
                     "IndexError @ functional.py:embedding", frames=(Frame("functional.py", 1, "embedding"),)))
    det.update(Progress(T0, "t.log:73", step=79))
    (alert,) = det.update(Tick(T0 + 10))
    assert alert.severity == "critical"


def test_progress_of_another_rank_or_a_relaunch_is_not_survival() -> None:
    det = CrashDetector(DetectorConfig())
    det.update(Progress(T0 - 1, "t.log:90", step=500, rank=0))
    det.update(Crash(T0, "t.log:100", "crash", "exception", "ValueError", "x", "ValueError @ a.py:f", rank=0,
                     frames=(Frame("a.py", 1, "f"),)))
    det.update(Progress(T0 + 1, "t.log:110", step=501, rank=1))  # another rank
    det.update(Progress(T0 + 2, "t.log:120", step=0, rank=0))  # a relaunch starts again
    (alert,) = det.update(Tick(T0 + 10))
    assert alert.severity == "critical" and alert.evidence["survived"] is None


# -- new kinds -----------------------------------------------------------------


def test_real_segfault_under_torchrun_is_one_segfault_alert() -> None:
    name = "torchrun_segfault_faulthandler_torch2.13.0.txt"
    (alert,) = alerts_of(events_of(name))
    assert (alert.severity, alert.kind, alert.evidence["cause"]) == ("critical", "segfault", "sigsegv")
    assert alert.evidence["frames"][-1].endswith(" in string_at")
    assert alert.evidence["report"]["cause"] == "sigsegv"


def test_real_host_oom_under_torchrun() -> None:
    name = "torchrun_host_oom_default_cpu_allocator_torch2.13.0.txt"
    (alert,) = alerts_of(events_of(name))
    assert (alert.kind, alert.evidence["rank"]) == ("host_oom", 0)
    assert "DefaultCPUAllocator: can't allocate memory" in alert.message


def test_sigkill_report_with_an_oom_kill_line_is_host_oom() -> None:
    report = Crash(T0, "agent.log:40", "crash", "killed", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                   "train.py FAILED; root cause rank 2 exitcode -9", "ChildFailedError(exitcode=-9)", rank=2, cause="sigkill")
    oom = Crash(T0 + 1, "dmesg.log:3", "crash", "host_oom", "OOMKiller", "Out of memory: Killed process 4241 (python)",
                "host_oom/oom_killer: x", cause="oom_killer")
    det = CrashDetector(DetectorConfig())
    det.update(report)
    det.update(oom)
    (alert,) = det.update(Tick(T0 + 10))
    assert (alert.kind, alert.evidence["cause"]) == ("host_oom", "oom_killer")
    assert alert.evidence["collateral"][0]["cause"] == "sigkill"


# -- the job's exit names the crash --------------------------------------------------


def test_process_exit_names_the_crash_read_from_the_log() -> None:
    det = ProcessExitDetector()
    oom = Crash(T0, "r3.log:9", "crash", "cuda_oom", "torch.OutOfMemoryError", "CUDA out of memory.", "OOM@x", rank=3)
    report = Crash(T0 + 2, "r3.log:30", "crash", "exception", "ChildFailedError", "train.py FAILED", "CFE", rank=3,
                   cause="child_failed")
    assert det.update(oom) == [] and det.update(report) == []
    (alert,) = det.update(ProcessExit(T0 + 5, "crash", code=1))
    assert alert.message == "training process exited with code 1 after a crash: torch.OutOfMemoryError (cuda_oom) on rank 3"
    assert alert.evidence["crash"]["kind"] == "cuda_oom" and alert.evidence["crash"]["rank"] == 3
    assert alert.evidence["crash"]["source"] == "r3.log:9"
    # A crash from long before is another incarnation's.
    (later,) = det.update(ProcessExit(T0 + 90_000, "crash", code=1))
    assert later.message == "training process crashed (exit code 1)" and "crash" not in later.evidence


@pytest.mark.parametrize("exit_kind", ["clean"])
def test_a_clean_exit_names_no_crash(exit_kind: str) -> None:
    det = ProcessExitDetector()
    det.update(Crash(T0, "a:1", "crash", "exception", "ValueError", "x", "s"))
    (alert,) = det.update(ProcessExit(T0 + 1, exit_kind, code=0))
    assert "after a crash" not in alert.message


# -- a crash loop: a relaunch that crashes again is a new incident -------------------


def _bad_batch(t: float, source: str, message: str = "bad batch at step 5", detector: str = "crash") -> Crash:
    kind = "fx_tracing" if detector == "fx_tracing" else "exception"
    return Crash(t, source, detector, kind, "ValueError", message, "ValueError @ train.py:forward",
                 frames=(Frame("train.py", 6, "forward"),))


def _run(file: str, first_line: int, t: float, steps: range) -> list:
    return [Progress(t + 0.1 * i, f"{file}:{first_line + i}", step=s) for i, s in enumerate(steps)]


@pytest.mark.parametrize(("second_file", "message", "detector"), [
    ("t.log", "bad batch at step 5", "crash"),  # the same traceback twice
    ("t.log", "corrupt shard 7", "crash"),  # the same type, another message
    ("t-2.log", "bad batch at step 5", "crash"),  # the relaunch logs to a new file
    ("t.log", "bad batch at step 5", "fx_tracing"),  # a tracing collision on every launch
])
def test_a_relaunch_that_crashes_again_25_s_later_is_a_second_alert(second_file: str, message: str,
                                                                     detector: str) -> None:
    events = _run("t.log", 1, T0, range(5)) + [_bad_batch(T0 + 1, "t.log:11", detector=detector)]
    # The relaunch: progress from step 0, then the same crash 25 s after the first.
    start = 20 if second_file == "t.log" else 1
    events += _run(second_file, start, T0 + 25, range(5)) + [_bad_batch(T0 + 26, f"{second_file}:{start + 10}",
                                                                       message, detector)]
    alerts = alerts_of(events)
    assert [(a.detector, a.source, a.severity) for a in alerts] == [
        (detector, "t.log:11", "critical"), (detector, f"{second_file}:{start + 10}", "critical")]
    assert alerts[1].evidence["message"] == message and alerts[0].evidence["count"] == 1


def test_a_relaunch_resuming_from_a_checkpoint_is_a_restart_too() -> None:
    # Steps 100-104, crash; the relaunch resumes at 100 (the last checkpoint).
    events = _run("t.log", 1, T0, range(100, 105)) + [_bad_batch(T0 + 1, "t.log:11")]
    events += _run("t.log", 20, T0 + 25, range(100, 103)) + [_bad_batch(T0 + 26, "t.log:30")]
    assert len(alerts_of(events)) == 2


@pytest.mark.parametrize("between", [
    [Progress(T0 + 1.1, "t.log:12", step=4)],  # tqdm's last redraw of the dying bar
    [Progress(T0 + 1.1, "t.log:12", step=5, rank=2)],  # a rank one step behind, once
    [Progress(T0 + 1.1, "t.log:12", step=4, rank=2), Progress(T0 + 1.2, "t.log:13", step=4, rank=3)],
])
def test_copies_from_other_ranks_after_one_progress_line_are_still_one_incident(between: list) -> None:
    events = _run("t.log", 1, T0, range(5)) + [_bad_batch(T0 + 1, "t.log:11")] + between
    events += [Crash(T0 + 3, "t.log:20", "crash", "exception", "ValueError", "bad batch at step 5",
                     "ValueError @ train.py:forward", rank=2, frames=(Frame("train.py", 6, "forward"),))]
    (alert,) = alerts_of(events)
    assert alert.evidence["count"] == 2


def test_a_fatal_repeat_after_the_program_went_on_is_a_second_alert() -> None:
    """Slow steps: the first traceback's proof came after the survival window
    (critical); the same traceback again with nothing after it is reported,
    not hidden in the first incident as a copy."""
    events = _run("t.log", 1, T0, range(5)) + [_bad_batch(T0 + 1, "t.log:11")]
    events += [Progress(T0 + 10, "t.log:12", step=5), Progress(T0 + 20, "t.log:13", step=6),
               _bad_batch(T0 + 30, "t.log:20")]
    assert [a.source for a in alerts_of(events)] == ["t.log:11", "t.log:20"]


def test_a_restarted_torchrun_worker_group_crashing_again_is_a_second_alert() -> None:
    """Real torchrun --max-restarts=1: the same traceback in both worker
    groups a second apart, no progress between; torch elastic's ``failed
    (exitcode: 1)`` line between them says the first group was gone."""
    name = "torchrun_max_restarts_same_crash_twice_torch2.13.0.txt"
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    alerts = alerts_of(events_of(name))
    cited = [int(a.source.rsplit(":", 1)[1]) for a in alerts]
    bad = "RuntimeError: bad config: drafter has 4 layers, checkpoint has 5"
    assert [lines[n - 1] for n in cited] == [bad, bad]
    assert cited[0] < cited[1] and alerts[1].evidence["report"] is not None
    for chunk in (1, 5):
        assert verdicts(alerts_of(events_of(name, chunk, quiet=True))) == verdicts(alerts), chunk


REALRUNS = Path(__file__).resolve().parents[1] / "fixtures" / "realruns"


def _stream_text(text: str, name: str, chunk_lines: int | None) -> list:
    stream = LogStream(name)
    lines = text.splitlines(keepends=True)
    out: list = []
    step = chunk_lines or len(lines)
    for at in range(0, len(lines), step):
        out.extend(stream.feed("".join(lines[at:at + step]), at + 1, T0))
        if chunk_lines:
            out.append(Quiet(T0, T0))
    out.extend(stream.flush(T0))
    return out


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_buffered_steps_between_a_rank_traceback_and_the_agents_report_are_no_relaunch(chunk: int | None) -> None:
    """Real torchrun, step lines print()ed to a block-buffered stdout: rank
    0's traceback, torchrun's ``failed (exitcode: 1)``, then the ranks'
    steps 1-24 as their buffers flush at exit, then elastic's report. The
    steps are the dead program's: one critical alert with the report in it
    (there were two, the report read as a relaunch's crash)."""
    name = "torchrun_ddp_print_buffered.log"
    alerts = alerts_of(_stream_text((REALRUNS / name).read_text(encoding="utf-8"), name, chunk))
    critical = [a for a in alerts if a.detector == "crash" and a.severity == "critical"]
    assert len(critical) == 1 and "bad shard file" in critical[0].message, [a.message for a in alerts]


@pytest.mark.parametrize("where", ["after the steps", "before the steps"])
def test_a_worker_group_ended_twice_before_the_report_is_a_relaunchs_death(where: str) -> None:
    """The same log with the agent's restart in it (``--max-restarts=1``):
    the group ended once (``failed (exitcode: 1)``), the restarted group
    died with no traceback (``exitcode: -9``), after its steps or before
    any. The report then is the second group's: an incident of its own."""
    name = "torchrun_ddp_print_buffered.log"
    lines = (REALRUNS / name).read_text(encoding="utf-8").splitlines(keepends=True)
    failed = next(i for i, line in enumerate(lines) if "failed (exitcode: 1)" in line)
    report = next(i for i, line in enumerate(lines) if line.startswith("Traceback"))
    again = re.sub(r"\(pid: \d+\)", "(pid: 31337)", lines[failed].replace("(exitcode: 1)", "(exitcode: -9)"))
    assert again != lines[failed] and "(pid: 31337)" in again
    at = report if where == "after the steps" else failed + 1
    text = "".join(lines[:at] + [again] + lines[at:])
    alerts = alerts_of(_stream_text(text, name, None))
    critical = [a for a in alerts if a.detector == "crash" and a.severity == "critical"]
    assert len(critical) == 2 and "bad shard file" in critical[0].message, [a.message for a in critical]
    assert int(critical[1].source.rsplit(":", 1)[1]) > report
