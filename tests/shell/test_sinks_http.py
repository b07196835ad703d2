"""HTTP sinks against a real HTTP server on 127.0.0.1: delivery, retries,
timeouts, refusals, filters, the rate limit and the secret URL.

Each sink has its own worker: a server that hangs costs only its own sink.
Timings are asserted relative to the hang, with generous margins.
"""

from __future__ import annotations

import json
import socket
import time

from loopback_http import LoopbackServer, refused_url
from sink_helpers import Notes, alert, dispatcher, until

FAST = {"backoff_s": 0.05}


def test_webhook_gets_the_contract_alert_object_as_json() -> None:
    notes = Notes()
    with LoopbackServer() as server:
        d = dispatcher({"kind": "webhook", "url": server.url, **FAST}, notes=notes)
        a = alert(gpu=3, kind="cuda_oom")
        d.offer(a)
        (got,) = server.wait_for(1)
        assert d.close(2.0) == {}
    assert got.headers["Content-Type"] == "application/json"
    body = json.loads(got.body)
    assert {k: body[k] for k in a.to_dict()} == a.to_dict()  # every field of section 2, as it is
    assert list(body)[:len(a.to_dict())] == list(a.to_dict())  # ...first, in its order
    assert body["host"] == socket.gethostname()
    assert body["startsAt"] == "2025-11-29T10:00:00.250Z" and "endsAt" not in body
    assert notes.items == []


def test_webhook_episodes_carry_starts_ends_and_one_fingerprint_each() -> None:
    """Routing (Alertmanager-style): the firing and the resolve of one episode
    share a fingerprint, the resolve says when it ended, the next episode of
    the same condition is a new fingerprint."""
    with LoopbackServer() as server:
        d = dispatcher({"kind": "webhook", "url": server.url, **FAST}, notes=Notes())
        t0 = 1764410400.25
        for a in (alert("stall", severity="warning", t=t0),
                  alert("stall", "resolved", severity="warning", t=t0 + 90),
                  alert("stall", severity="warning", t=t0 + 600),
                  alert("crash", gpu=1, kind="cuda_oom", t=t0 + 601)):
            d.offer(a)
        fired, resolved, again, other = (json.loads(r.body) for r in server.wait_for(4))
        assert d.close(2.0) == {}
    assert fired["startsAt"] == resolved["startsAt"] == "2025-11-29T10:00:00.250Z"
    assert "endsAt" not in fired and resolved["endsAt"] == "2025-11-29T10:01:30.250Z"
    assert resolved["state"] == "resolved" and resolved["time"] == t0 + 90  # the alert object stays
    assert fired["fingerprint"] == resolved["fingerprint"]
    assert again["fingerprint"] != fired["fingerprint"] and again["startsAt"] == "2025-11-29T10:10:00.250Z"
    assert other["fingerprint"] not in (fired["fingerprint"], again["fingerprint"])
    assert all(b["host"] == socket.gethostname() for b in (fired, resolved, again, other))


def test_a_webhook_sink_with_a_source_names_it_as_the_host() -> None:
    """One watcher per node behind NAT or in containers: ``source`` names it (as PagerDuty's)."""
    with LoopbackServer() as server:
        d = dispatcher({"kind": "webhook", "url": server.url, "source": "node-7", **FAST}, notes=Notes())
        d.offer(alert("stall", severity="warning"))
        (body,) = (json.loads(r.body) for r in server.wait_for(1))
        assert d.close(2.0) == {}
    assert body["host"] == "node-7"


def test_500_then_200_is_retried_and_delivered_once() -> None:
    notes = Notes()
    with LoopbackServer([500, 200]) as server:
        d = dispatcher({"kind": "webhook", "url": server.url, "retries": 3, **FAST}, notes=notes)
        d.offer(alert())
        first, second = server.wait_for(2)
        assert until(lambda: d.workers[0].delivered == 1)
        time.sleep(0.2)  # nothing more comes: one delivery
        assert d.close(2.0) == {}
        assert len(server.received) == 2
    assert first.body == second.body
    assert second.at - first.at >= 0.04  # after the backoff
    assert "HTTP 500" in notes.items[0] and "retry 1/3" in notes.items[0]
    assert "delivered the crash alert (firing) on retry 1" in notes.items[1]


def test_a_hanging_sink_delays_neither_another_sink_nor_the_caller() -> None:
    notes = Notes()
    hang_s = 1.2
    with LoopbackServer(default="hang") as stuck, LoopbackServer() as fine:
        d = dispatcher(
            {"kind": "slack", "url": stuck.url, "timeout_s": hang_s, "retries": 0},
            {"kind": "webhook", "url": fine.url},
            notes=notes,
        )
        d.offer(alert("stall", severity="warning"))
        stuck.wait_for(1)  # the hanging sink holds its request open...
        t0 = time.monotonic()
        d.offer(alert("crash"))  # ...the caller (the Monitor) is not held up...
        offered = time.monotonic() - t0
        got = fine.wait_for(2)  # ...and the other sink gets both POSTs at once
        assert len(got) == 2 and got[1].at - t0 < hang_s / 4
        assert offered < 0.05
        timed_out = notes.wait(lambda m: "slack[0]" in m and "no answer within 1.2 s" in m, timeout=hang_s + 3)
        assert timed_out and "gave up after 1 attempt" in timed_out
        lost = d.close(0.5)
    assert lost["slack[0]"] == 2  # one given up, one still queued behind it
    assert "sink slack[0]: 2 alerts dropped (" in notes.text()  # one line for the sink, at close
    assert "webhook[0]" not in lost


def test_connection_refused_is_a_notice_retried_then_reported() -> None:
    notes = Notes()
    d = dispatcher({"kind": "ntfy", "url": refused_url(), "retries": 2, **FAST}, notes=notes)
    d.offer(alert())
    gave_up = notes.wait(lambda m: "gave up" in m)
    assert gave_up and "connection refused" in gave_up and "after 3 attempts" in gave_up
    assert [m for m in notes.items if "retry" in m][:2] == [
        "sink ntfy[0]: delivery of the crash alert (firing) failed: connection refused; retry 1/2 in 0.05 s",
        "sink ntfy[0]: delivery of the crash alert (firing) failed: connection refused; retry 2/2 in 0.1 s",
    ]
    assert d.close(1.0) == {"ntfy[0]": 1}


def test_close_gives_a_pending_retry_its_last_chance_at_once() -> None:
    notes = Notes()
    with LoopbackServer([503, 200]) as server:
        d = dispatcher({"kind": "webhook", "url": server.url, "backoff_s": 60.0}, notes=notes)
        d.offer(alert())
        server.wait_for(1)
        t0 = time.monotonic()
        assert d.close(3.0) == {}  # not 60 s of backoff: retried at once
        assert time.monotonic() - t0 < 2.0
        assert len(server.received) == 2


def test_severity_and_detector_filters() -> None:
    notes = Notes()
    with LoopbackServer() as server:
        d = dispatcher({"kind": "webhook", "url": server.url, "min_severity": "warning",
                        "detectors": ["crash", "stall", "memory_growth"], "exclude": ["stall"],
                        "send_resolved": False}, notes=notes)
        d.offer(alert("crash", severity="info"))  # below min_severity
        d.offer(alert("stall", severity="warning"))  # excluded
        d.offer(alert("throughput_drop", severity="warning"))  # not included
        d.offer(alert("memory_growth", "resolved", "warning", gpu=1))  # resolved not wanted
        d.offer(alert("memory_growth", severity="warning", gpu=1))  # passes
        d.offer(alert("crash", severity="critical"))  # passes
        got = server.wait_for(2)
        time.sleep(0.2)
        assert d.close(1.0) == {}
        assert len(server.received) == 2
    assert [(b["detector"], b["state"]) for b in (json.loads(r.body) for r in got)] == [
        ("memory_growth", "firing"), ("crash", "firing")]


def test_rate_limit_counts_what_it_holds_back_and_its_resolves_follow() -> None:
    notes = Notes()
    with LoopbackServer() as server:
        d = dispatcher({"kind": "webhook", "url": server.url, "max_per_minute": 2}, notes=notes)
        for gpu in range(4):
            d.offer(alert("memory_pressure", severity="warning", gpu=gpu))
        d.offer(alert("memory_pressure", "resolved", "warning", gpu=0))  # its firing went: goes
        d.offer(alert("memory_pressure", "resolved", "warning", gpu=3))  # its firing was held: held
        got = server.wait_for(3)
        time.sleep(0.2)
        lost = d.close(1.0)
        assert len(server.received) == 3
    assert [(json.loads(r.body)["gpu"], json.loads(r.body)["state"]) for r in got] == [
        (0, "firing"), (1, "firing"), (0, "resolved")]
    assert lost == {"webhook[0]": 3}
    said = notes.text()
    assert "rate limit max_per_minute = 2 reached: the memory_pressure gpu2 alert (firing) not sent" in said
    assert "sink webhook[0]: 3 alerts dropped (3 over the rate limit)" in said


def test_a_full_queue_says_how_many_it_dropped() -> None:
    notes = Notes()
    with LoopbackServer(default="hang") as server:
        d = dispatcher({"kind": "webhook", "url": server.url, "queue_size": 1, "timeout_s": 5.0}, notes=notes)
        d.offer(alert(gpu=0))
        server.wait_for(1)  # in flight
        for gpu in (1, 2, 3):
            d.offer(alert(gpu=gpu))  # gpu1 queued, gpu2 and gpu3 dropped
        lost = d.close(0.3)
    said = notes.text()
    assert "1 deliveries pending, queue full: the crash gpu2 alert (firing) dropped" in said
    assert "4 alerts dropped (2 queue full, 2 not delivered when the watcher stopped)" in said  # in flight + queued
    assert lost == {"webhook[0]": 4}


def test_the_secret_url_is_never_in_a_notice(monkeypatch) -> None:
    notes = Notes()
    with LoopbackServer([500, 200]) as server:
        secret = server.url + "/T0SECRET/B0SECRET/xoxSECRETTOKEN"
        monkeypatch.setenv("DFW_TEST_HOOK", secret)
        monkeypatch.setenv("DFW_TEST_DEAD", refused_url() + "/xoxSECRETTOKEN")
        d = dispatcher({"kind": "slack", "url_env": "DFW_TEST_HOOK", **FAST},
                       {"kind": "slack", "url_env": "DFW_TEST_DEAD", "retries": 1, **FAST},
                       {"kind": "webhook", "url_env": "DFW_TEST_UNSET"}, notes=notes)
        d.offer(alert())
        (first, _) = server.wait_for(2)
        assert first.path.endswith("/xoxSECRETTOKEN")  # it was used...
        assert notes.wait(lambda m: "slack[1]" in m and "gave up" in m)
        d.close(1.0)
    said = notes.text()
    assert "SECRET" not in said and "127.0.0.1" not in said  # ...and never said
    assert "sink slack[0] (url from $DFW_TEST_HOOK): delivery of" in said
    assert "sink webhook[0] (url from $DFW_TEST_UNSET): could not deliver the crash alert (firing): " \
           "$DFW_TEST_UNSET is not set (gave up after 1 attempt)" in said
