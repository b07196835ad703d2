"""The readers split out of parsers/tracebacks.py: faulthandler's block,
one-line fatal signals (torch elastic's own lines among them) and the
ChildFailedError report, through the CrashAssembler as the stream feeds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_watch.parsers.crash.child_report import ReportReader
from dflash_watch.parsers.crash.tracebacks import TRIGGERS
from dflash_watch.parsers.events import Crash
from tests.core.test_tracebacks import crashes, feed_lines, feed_text, lineno

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"


def fixture(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").split("\n")


# -- faulthandler ----------------------------------------------------------------


def test_faulthandler_segfault_block_with_other_threads() -> None:
    # Python 3.11's output for a segfault with a second thread alive (captured here).
    text = """\
        step 12 | loss 2.1
        Fatal Python error: Segmentation fault

        Thread 0x00007f0936c0f6c0 (most recent call first):
          File "<string>", line 3 in bg
          File "/usr/lib/python3.11/threading.py", line 982 in run

        Current thread 0x00007f093788cb80 (most recent call first):
          File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
          File "/w/kernels.py", line 5 in launch
          File "/w/train.py", line 6 in <module>

        Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)
        step 13 | loss 2.0
    """
    [crash] = crashes(feed_text(text, "f.log"))
    assert (crash.detector, crash.kind, crash.cause) == ("crash", "segfault", "sigsegv")
    assert (crash.exc_type, crash.message, crash.source) == ("Fatal Python error", "Segmentation fault", "f.log:2")
    assert [f.function for f in crash.frames] == ["<module>", "launch", "string_at"]  # outermost first
    assert crash.signature == "SIGSEGV @ __init__.py:string_at < kernels.py:launch < train.py:<module>"
    assert crash.text[-1].startswith("Extension modules:") and "step 13 | loss 2.0" not in crash.text


@pytest.mark.parametrize(("error", "kind", "cause"), [
    ("Aborted", "segfault", "sigabrt"),
    ("Bus error", "segfault", "sigbus"),
    ("_PyMem_DebugMallocEx: Python memory allocator called without holding the GIL", "exception", "fatal_python_error"),
])
def test_other_fatal_python_errors(error: str, kind: str, cause: str) -> None:
    lines = [f"Fatal Python error: {error}", "", "Current thread 0x00007f93e780eb80 (most recent call first):",
             '  File "<string>", line 1 in <module>', "E1201 09:19:39.397000 1 api.py:1] next record"]
    [crash] = [c for c in crashes(feed_lines(lines)) if c.exc_type == "Fatal Python error"]
    assert (crash.kind, crash.cause, crash.message, len(crash.frames)) == (kind, cause, error, 1)


def test_real_segfault_fixture_under_torchrun() -> None:
    found = crashes(feed_lines(fixture("torchrun_segfault_faulthandler_torch2.13.0.txt"), "s.log"))
    fault = [c for c in found if c.exc_type == "Fatal Python error"]
    assert [(c.kind, c.cause, lineno(c)) for c in fault] == [("segfault", "sigsegv", 7)]
    assert fault[0].frames[-2].function == "drafter_kernel"
    [report] = [c for c in found if c.exc_type.endswith("ChildFailedError")]
    assert (report.kind, report.cause, report.rank) == ("segfault", "sigsegv", 1)
    exit_line = [c for c in found if c.cause == "child_exit"]
    assert [(c.rank, "exitcode: -11" in c.message) for c in exit_line] == [(1, True)]


# -- one-line signals -------------------------------------------------------------


@pytest.mark.parametrize(("line", "kind", "cause", "rank"), [
    ("W1201 09:19:29.014000 9039 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 9042 "
     "closing signal SIGTERM", "exception", "torchrun_stopping", None),
    ("E1201 09:19:29.031000 9039 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
     "local_rank: 1 (pid: 9043) of binary: /work/venv/bin/python3", "exception", "child_exit", 1),
    ("terminate called after throwing an instance of 'c10::DistBackendError'", "exception", "terminate", None),
    ("Signal 11 (SIGSEGV) received by PID 4242", "segfault", "sigsegv", None),
    ("Signal 6 (SIGABRT) received by PID 4242", "segfault", "sigabrt", None),
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 77 got signal: 15", "killed", "sigterm",
     None),
])
def test_torch_elastic_and_signal_lines(line: str, kind: str, cause: str, rank: int | None) -> None:
    [crash] = crashes(feed_lines(["before", line, "after"]))
    assert (crash.kind, crash.cause, crash.rank, lineno(crash)) == (kind, cause, rank, 2)
    assert any(t in line for t in TRIGGERS)


def test_the_agents_sigterm_to_siblings_is_never_killed() -> None:
    found = crashes(feed_lines(fixture("torchrun_gloo_cascade_rank1_raises_torch2.13.0.txt"), "c.log"))
    assert [c for c in found if c.kind == "killed"] == []
    assert [lineno(c) for c in found if c.cause == "torchrun_stopping"] == [30, 31]


def test_a_report_field_read_on_its_own_is_no_signal() -> None:
    # A report cut apart (a pasted tail): its ``traceback :`` field is not a kill.
    assert crashes(feed_lines(["x", "  traceback : Signal 15 (SIGTERM) received by PID 9042", "y"])) == []


# -- the ChildFailedError report --------------------------------------------------


def test_report_keeps_the_root_and_tells_stopped_siblings_from_failed_ones() -> None:
    reader = ReportReader()
    lines = fixture("torchrun_gloo_cascade_rank1_raises_torch2.13.0.txt")
    start = next(i for i, line in enumerate(lines) if line.startswith("=====")) + 1
    done = False
    for line in lines[start:]:
        if reader.feed(line):
            done = True
            break
    assert done
    report = reader.report()
    assert (report.script, report.root_rank, report.root_exitcode, report.root_pid) == ("cascade.py", 1, 1, 9043)
    assert report.failed_ranks == (0, 2) and report.stopped_ranks == (0, 2)


def test_root_cause_minus_15_is_killed_but_sibling_minus_15_is_not() -> None:
    def report(root_code: int, sibling_code: int) -> Crash:
        text = f"""\
            torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
            ============================================================
            train.py FAILED
            ------------------------------------------------------------
            Failures:
            [1]:
              rank      : 0 (local_rank: 0)
              exitcode  : {sibling_code} (pid: 11)
              traceback : Signal 15 (SIGTERM) received by PID 11
            ------------------------------------------------------------
            Root Cause (first observed failure):
            [0]:
              rank      : 1 (local_rank: 1)
              exitcode  : {root_code} (pid: 12)
              traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
            ============================================================
        """
        [crash] = crashes(feed_text(text))
        return crash

    assert (report(1, -15).kind, report(1, -15).cause) == ("exception", "child_failed")
    assert (report(-15, -15).kind, report(-15, -15).cause) == ("killed", "sigterm")
    assert (report(-11, -15).kind, report(-11, -15).cause) == ("segfault", "sigsegv")
    assert (report(-7, -15).kind, report(-7, -15).cause) == ("segfault", "sigbus")
    assert "stopped by torchrun (SIGTERM): ranks 0" in report(1, -15).message
    assert "also failed" not in report(1, -15).message


# -- host memory -------------------------------------------------------------------


def test_real_default_cpu_allocator_failure_is_host_oom() -> None:
    found = crashes(feed_lines(fixture("torchrun_host_oom_default_cpu_allocator_torch2.13.0.txt"), "h.log"))
    [oom] = [c for c in found if c.kind == "host_oom"]
    assert (oom.rank, oom.exc_type, lineno(oom)) == (0, "RuntimeError", 9)
    [peer] = [c for c in found if c.cause == "peer_failure"]
    assert peer.rank == 1


def test_memory_error_is_host_oom() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/data.py", line 4, in load
            buf = bytearray(n)
        MemoryError
    """
    [crash] = crashes(feed_text(text))
    assert (crash.kind, crash.exc_type) == ("host_oom", "MemoryError")
