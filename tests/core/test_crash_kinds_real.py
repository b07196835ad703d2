"""Kinds that say whose fault a crash was, on real torch 2.13 output
(tests/shell/test_real_torch_signals.py captures it afresh):

- SIGTERM to torchrun: its agent's ``SignalException: Process N got signal:
  15`` is ``killed`` (from outside), not ``exception`` (CONTRACTS section 4);
- a gloo collective that timed out (all_reduce, monitored_barrier) is
  ``nccl_timeout``: any backend's collective timeout, naming the rank that
  waited and the rank that never joined.
"""

from __future__ import annotations

import pytest

from dflash_watch.parsers.crash.signatures import ExcLine, agent_signal, classify, collective_timeout, scan_markers
from dflash_watch.parsers.events import Frame
from tests.core.test_crash_incidents import alerts_of, events_of, verdicts

SIGTERM = "torchrun_sigterm_to_agent_torch2.13.0.txt"
GLOO = "torchrun_gloo_timeout_rank1_absent_torch2.13.0.txt"
BARRIER = "torchrun_gloo_monitored_barrier_rank1_absent_torch2.13.0.txt"


def test_sigterm_to_torchrun_is_killed() -> None:
    (alert,) = alerts_of(events_of(SIGTERM))
    assert (alert.kind, alert.evidence["cause"], alert.severity) == ("killed", "sigterm", "critical")
    assert alert.evidence["exc_type"].endswith("SignalException")
    assert alert.message.startswith("training killed from outside (sigterm): Process ")
    assert "killed from outside" in alert.evidence["remedy"]


@pytest.mark.parametrize(("name", "says"), [
    (GLOO, "Timed out waiting 2000ms for recv operation to complete"),
    (BARRIER, "Rank 1 failed to pass monitoredBarrier in 2000 ms"),
])
def test_a_gloo_timeout_is_nccl_timeout_naming_who_waited_and_who_did_not_join(name: str, says: str) -> None:
    (alert,) = alerts_of(events_of(name))
    assert (alert.kind, alert.severity, alert.evidence["rank"]) == ("nccl_timeout", "critical", 0)
    assert says in alert.evidence["message"]
    assert alert.message.startswith("collective timeout on rank 0: RuntimeError: ")
    assert "rank 0 timed out waiting for another rank; suspect rank 1" in alert.message
    assert (alert.evidence["timed_out_ranks"], alert.evidence["suspect_ranks"]) == ([0], [1])
    assert "find the rank that did not join" in alert.evidence["remedy"]
    # torchrun's lines and its report are consequences, in the evidence.
    causes = {c["cause"] for c in alert.evidence["collateral"]}
    assert {"torchrun_stopping", "child_exit", "child_failed"} <= causes
    # The same verdict read in pieces with the log going quiet between them.
    for chunk in (1, 4, 9):
        assert verdicts(alerts_of(events_of(name, chunk, quiet=True))) == verdicts([alert]), chunk


@pytest.mark.parametrize(("message", "expected"), [
    ("Process 4242 got signal: 15", ("killed", "sigterm")),
    ("Process 4242 got signal: 9", ("killed", "sigkill")),
    ("Process 4242 got signal: 1", ("killed", "sighup")),
    ("Process 4242 got signal: 2", ("exception", "keyboard_interrupt")),
])
def test_the_agents_signal_number_says_whose_hand(message: str, expected: tuple[str, str]) -> None:
    assert agent_signal(message) == expected
    chain = (ExcLine("torch.distributed.elastic.multiprocessing.api.SignalException", message),)
    verdict = classify(chain, (), frozenset())
    assert (verdict.kind, verdict.cause) == expected


C10D = (Frame("/v/torch/distributed/distributed_c10d.py", 3252, "all_reduce"),)


@pytest.mark.parametrize(("exc", "message", "frames", "cause"), [
    ("RuntimeError", "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Timed out waiting 30000ms for send "
     "operation to complete", (), "gloo_timeout"),
    ("torch.distributed.DistStoreError", "Timed out after 901 seconds waiting for clients. 7/8 clients joined.",
     (), "store_timeout"),
    ("torch.distributed.DistStoreError", "wait timeout after 1000ms, keys: /barrier", (), "store_timeout"),
    ("torch.distributed.DistBackendError", "[Rank 3] ProcessGroupGloo all_reduce timed out", (), "gloo_timeout"),
    ("torch.distributed.DistNetworkError", "Socket Timeout", (), "collective_timeout"),
    ("RuntimeError", "operation timed out", C10D, "collective_timeout"),
])
def test_collective_timeouts_of_any_backend(exc: str, message: str, frames: tuple, cause: str) -> None:
    markers = scan_markers(f"{exc}: {message}")
    verdict = classify((ExcLine(exc, message),), frames, markers)
    assert (verdict.kind, verdict.cause) == ("nccl_timeout", cause)


@pytest.mark.parametrize(("exc", "message"), [
    # "timed out" outside torch.distributed is somebody else's timeout.
    ("requests.exceptions.ReadTimeout", "HTTPSConnectionPool(host='huggingface.co'): Read timed out."),
    ("TimeoutError", "Timed out waiting for the file lock"),
])
def test_other_timeouts_stay_exceptions(exc: str, message: str) -> None:
    markers = scan_markers(f"{exc}: {message}")
    assert collective_timeout({exc.rsplit(".", 1)[-1]}, (), markers) is None
    assert classify((ExcLine(exc, message),), (), markers).kind == "exception"
