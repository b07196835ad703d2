"""What Slack, ntfy and PagerDuty receive, field by field, on a real loopback server.

The payload builders are pure (``dflash_watch.sinks.payloads``); these
tests send through the real senders so that the bytes on the wire are the
ones checked, headers included.
"""

from __future__ import annotations

import json

from loopback_http import LoopbackServer
from sink_helpers import Notes, alert, dispatcher

from dflash_watch.sinks import payloads

HOSTILE = "step 7 <!channel> & <https://evil.example|click> [bold red]x[/] \x1b[31mred"


def test_slack_gets_one_text_field_with_the_log_text_escaped() -> None:
    notes = Notes()
    with LoopbackServer() as server:
        d = dispatcher({"kind": "slack", "url": server.url}, notes=notes)
        d.offer(alert("crash", kind="cuda_oom", gpu=3, message=HOSTILE))
        (got,) = server.wait_for(1)
        d.close(1.0)
    body = json.loads(got.body)
    assert list(body) == ["text"]
    head, message, source = body["text"].split("\n")
    assert head == ":rotating_light: *critical: crash (cuda_oom) on GPU 3*"
    # Slack's own markup never takes effect: no @channel, no disguised link.
    assert message == ("step 7 &lt;!channel&gt; &amp; &lt;https://evil.example|click&gt; "
                       "[bold red]x[/] \x1b[31mred")
    assert source == "_train.log:1234_"
    assert got.headers["Content-Type"] == "application/json"


def test_ntfy_gets_the_message_as_body_and_title_priority_tags_headers() -> None:
    notes = Notes()
    with LoopbackServer() as server:
        d = dispatcher({"kind": "ntfy", "url": server.url, "tags": ["node7"]}, notes=notes)
        d.offer(alert("crash", kind="nccl_timeout", message="NCCL watchdog\nline two"))
        d.offer(alert("throughput_drop", severity="warning", message="4.3 Ktok/s"))
        d.offer(alert("throughput_drop", "resolved", "warning", message="back to 21 Ktok/s"))
        crash, drop, back = server.wait_for(3)
        d.close(1.0)
    assert crash.body.decode() == "NCCL watchdog\nline two\ntrain.log:1234"
    assert crash.headers["Title"] == "dflash-watch critical: crash (nccl_timeout)"
    assert crash.headers["Priority"] == "5"
    assert crash.headers["Tags"] == "rotating_light,crash,node7"
    assert (drop.headers["Priority"], drop.headers["Tags"]) == ("4", "warning,throughput_drop,node7")
    assert back.headers["Title"] == "dflash-watch resolved: throughput_drop"
    assert (back.headers["Priority"], back.headers["Tags"]) == ("2", "white_check_mark,throughput_drop,node7")


def test_pagerduty_triggers_and_resolves_one_incident_per_episode(monkeypatch) -> None:
    monkeypatch.setenv("DFW_TEST_PD_KEY", "R0UT1NGKEY")
    notes = Notes()
    with LoopbackServer() as server:
        d = dispatcher({"kind": "pagerduty", "url": server.url, "routing_key_env": "DFW_TEST_PD_KEY",
                        "source": "node7"}, notes=notes)
        fired = alert("memory_growth", severity="warning", gpu=5, message="GPU 5 climbs 2.1 GiB/h", t=1000.0)
        d.offer(fired)
        d.offer(alert("memory_growth", "resolved", "warning", gpu=5, message="flat again", t=1900.0))
        d.offer(alert("memory_growth", severity="warning", gpu=5, message="climbs again", t=5000.0))
        trigger, resolve, again = (json.loads(r.body) for r in server.wait_for(3))
        d.close(1.0)
    assert trigger["routing_key"] == "R0UT1NGKEY"
    assert trigger["event_action"] == "trigger"
    payload = trigger["payload"]
    assert payload["summary"] == "warning: memory_growth on GPU 5: GPU 5 climbs 2.1 GiB/h"
    assert payload["severity"] == "warning"
    assert payload["source"] == "node7"
    assert payload["component"] == "memory_growth"
    assert payload["group"] == "gpu5"
    assert payload["custom_details"] == fired.to_dict()
    assert payload["timestamp"] == "1970-01-01T00:16:40+00:00"
    assert resolve == {"routing_key": "R0UT1NGKEY", "event_action": "resolve",
                       "dedup_key": trigger["dedup_key"], "client": "dflash-watch"}
    # A new episode of the same condition is a new incident.
    assert again["event_action"] == "trigger" and again["dedup_key"] != trigger["dedup_key"]
    assert trigger["dedup_key"] == payloads.dedup_key(fired, 1000.0, "node7")
    assert notes.items == []


def test_dedup_key_is_stable_and_differs_by_node_gpu_kind_and_start() -> None:
    a = alert("crash", kind="cuda_oom", gpu=1)
    key = payloads.dedup_key(a, 10.0, "n1")
    assert key == payloads.dedup_key(alert("crash", kind="cuda_oom", gpu=1, message="other"), 10.0, "n1")
    others = {payloads.dedup_key(a, 11.0, "n1"), payloads.dedup_key(a, 10.0, "n2"),
              payloads.dedup_key(alert("crash", kind="nccl_timeout", gpu=1), 10.0, "n1"),
              payloads.dedup_key(alert("crash", kind="cuda_oom", gpu=2), 10.0, "n1")}
    assert key not in others and len(others) == 4


def test_a_failed_resolve_is_retried_with_its_own_dedup_key(monkeypatch) -> None:
    monkeypatch.setenv("DFW_TEST_PD_KEY", "k")
    notes = Notes()
    with LoopbackServer([200, 502, 200]) as server:
        d = dispatcher({"kind": "pagerduty", "url": server.url, "routing_key_env": "DFW_TEST_PD_KEY",
                        "backoff_s": 0.05}, notes=notes)
        d.offer(alert("stall", severity="warning", t=50.0))
        d.offer(alert("stall", "resolved", "warning", t=90.0))
        trigger, failed, retried = (json.loads(r.body) for r in server.wait_for(3))
        d.close(1.0)
    assert failed == retried and retried["event_action"] == "resolve"
    assert retried["dedup_key"] == trigger["dedup_key"]


def test_ntfy_headers_stay_one_latin1_line() -> None:
    out = payloads.ntfy(alert("crash", kind="x\r\nInjected: 1"), ("tag\nX-Evil: 1", "ünï☃"))
    for name, value in out.headers:
        assert "\n" not in value and "\r" not in value
        value.encode("latin-1")
    assert out.header("Title") == "dflash-watch critical: crash (x Injected: 1)"
