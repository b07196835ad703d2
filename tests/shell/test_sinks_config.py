"""``[[alerts.sink]]`` tables: typed, checked, one line naming the key when wrong."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_watch.config import ConfigError, load_config, parse_config
from dflash_watch.config_template import example_config


def _sinks(*tables: dict) -> tuple:
    return parse_config({"alerts": {"sink": list(tables)}}).alerts.sinks


def test_sink_tables_become_typed_sinks_numbered_per_kind(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        'alerts_file = "alerts.jsonl"\n'
        '[[alerts.sink]]\nkind = "slack"\nurl_env = "SLACK_WEBHOOK_URL"\nmin_severity = "warning"\n'
        'exclude = ["recompile"]\nmax_per_minute = 6\nretries = 5\nbackoff_s = 2\ntimeout_s = 4\n'
        '[[alerts.sink]]\nkind = "command"\nargv = ["logger", "-t", "dflash"]\n'
        '[[alerts.sink]]\nkind = "slack"\nname = "oncall"\nurl = "http://127.0.0.1:9/x"\n'
        'detectors = ["crash", "fx_tracing"]\nsend_resolved = false\n'
    )
    cfg = load_config(tmp_path / "c.toml")
    assert cfg.alerts_file == "alerts.jsonl"  # still there beside the sinks
    slack, command, oncall = cfg.alerts.sinks
    assert (slack.name, slack.url_env, slack.min_severity, slack.exclude) == (
        "slack[0]", "SLACK_WEBHOOK_URL", "warning", ("recompile",))
    assert (slack.max_per_minute, slack.retries, slack.backoff_s, slack.timeout_s) == (6, 5, 2.0, 4.0)
    assert isinstance(slack.backoff_s, float) and isinstance(slack.retries, int)
    assert command.argv == ("logger", "-t", "dflash") and command.name == "command[0]"
    assert oncall.name == "oncall" and oncall.detectors == ("crash", "fx_tracing") and not oncall.send_resolved
    assert slack.where() == "sink slack[0] (url from $SLACK_WEBHOOK_URL)"
    assert oncall.where() == "sink oncall"


@pytest.mark.parametrize(("tables", "message"), [
    ([{"kind": "slak"}], '[[alerts.sink]] #1 kind: "slak" is not a sink kind (one of bell, desktop, webhook'),
    ([{"kind": "bell"}, {"kind": "Slack", "name": "oncall"}],
     ('[[alerts.sink]] #2 ("oncall") kind: "Slack" is not a sink kind (one of bell, desktop, webhook, slack, ntfy, '
      'pagerduty, command)')),
    ([{"kind": ["slack"]}], '[[alerts.sink]] #1 kind: ["slack"] is not a sink kind (one of bell'),
    ([{"url": "http://x"}], "[[alerts.sink]] #1 kind: missing"),
    ([{"kind": "slack"}], "[alerts.sink slack[0]] url_env: a slack sink needs url_env (or url)"),
    ([{"kind": "webhook", "url": "ftp://h/x"}], "[alerts.sink webhook[0]] url: must start with http://"),
    ([{"kind": "webhook", "url": "http://h", "url_env": "X"}], "[alerts.sink webhook[0]] url, url_env: give one"),
    ([{"kind": "pagerduty"}], "[alerts.sink pagerduty[0]] routing_key_env: a pagerduty sink needs it"),
    ([{"kind": "command"}], "[alerts.sink command[0]] argv: a command sink needs argv"),
    ([{"kind": "command", "argv": "notify.sh"}], '[alerts.sink command[0]] argv = "notify.sh": must be a list'),
    ([{"kind": "bell", "url": "http://h"}], "[alerts.sink bell[0]] url: a bell sink takes no url"),
    ([{"kind": "bell", "min_severity": "error"}], '[alerts.sink bell[0]] min_severity = "error": one of info'),
    ([{"kind": "bell", "detectors": ["stal"]}], '[alerts.sink bell[0]] detectors: "stal" is not a detector'),
    ([{"kind": "bell", "retries": -1}], "[alerts.sink bell[0]] retries = -1: must be a whole number in [0, 100]"),
    ([{"kind": "bell", "timeout_s": 0}], "[alerts.sink bell[0]] timeout_s = 0: must be > 0"),
    ([{"kind": "bell", "max_per_minute": 1.5}], "[alerts.sink bell[0]] max_per_minute = 1.5: must be a whole"),
    ([{"kind": "bell", "send_resolved": "no"}], '[alerts.sink bell[0]] send_resolved = "no": must be true or false'),
    ([{"kind": "bell", "timout_s": 1}], "[alerts.sink bell[0]] timout_s: unknown key (did you mean timeout_s?)"),
    ([{"kind": "bell"}, {"kind": "bell", "name": "bell[0]"}], '[[alerts.sink]] bell[0]: name = "bell[0]" is used'),
])
def test_a_bad_sink_is_one_line_naming_the_key(tables: list, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        _sinks(*tables)
    assert str(exc.value).startswith(message), exc.value
    assert "\n" not in str(exc.value)


def test_alerts_must_be_tables() -> None:
    with pytest.raises(ConfigError, match=re.escape("[alerts] sinks: unknown key (did you mean sink?)")):
        parse_config({"alerts": {"sinks": []}})
    with pytest.raises(ConfigError, match=re.escape("[alerts] sink: must be [[alerts.sink]] tables")):
        parse_config({"alerts": {"sink": "slack"}})


def test_the_templates_sink_example_loads_when_uncommented() -> None:
    import tomllib

    text = example_config()
    line = next(x for x in text.splitlines() if x.startswith("# sink = "))
    head = text[: text.index("[alerts]")]
    (slack,) = parse_config(tomllib.loads(head + "[alerts]\n" + line[2:] + "\n")).alerts.sinks
    assert (slack.kind, slack.url_env, slack.min_severity) == ("slack", "SLACK_WEBHOOK_URL", "warning")
    assert parse_config(tomllib.loads(text)).alerts.sinks == ()  # as written: no sink


def test_an_unknown_kind_stops_the_command_with_one_line(tmp_path: Path) -> None:
    """Once an unknown kind silently became a bell; now the config is refused (exit 2)."""
    from test_config import a_log, cli, one_line

    (tmp_path / "c.toml").write_text('[[alerts.sink]]\nkind = "bel"\n')
    out = cli("replay", "--json", "--config", "c.toml", str(a_log(tmp_path)), cwd=tmp_path)
    assert one_line(out) == ('dflash-watch: [[alerts.sink]] #1 kind: "bel" is not a sink kind '
                             "(one of bell, desktop, webhook, slack, ntfy, pagerduty, command)")


def test_every_kind_has_one_sender_and_no_kind_falls_through() -> None:
    """``settings.SINK_KINDS`` is the one table of kinds; ``SENDERS`` is built
    from it and each kind builds its own sender."""
    from dflash_watch.sinks import senders
    from dflash_watch.sinks.settings import HTTP_KINDS, KINDS, SINK_KINDS, SinkConfig

    assert KINDS == ("bell", "desktop", "webhook", "slack", "ntfy", "pagerduty", "command")
    assert HTTP_KINDS == {"webhook", "slack", "ntfy", "pagerduty"}
    assert list(senders.SENDERS) == list(KINDS)
    assert all(senders.SENDERS[k.name] is getattr(senders, k.sender) for k in SINK_KINDS)
    made = {kind: type(senders.build_sender(SinkConfig(kind, f"{kind}[0]", url="http://127.0.0.1:9/",
                                                       routing_key_env="K", argv=("true",))))
            for kind in KINDS}
    assert made["bell"] is senders.BellSender and made["command"] is senders.CommandSender
    assert made["desktop"] is senders.DesktopSender
    assert {made[k] for k in ("webhook", "pagerduty")} == {senders.EpisodeSender}
    assert {made[k] for k in ("slack", "ntfy")} == {senders.HttpSender}
    with pytest.raises(ConfigError, match=r"sink x\[0\]: kind \"bel\" is not a sink kind \(known: bell"):
        SinkConfig("bel", "x[0]")


def test_a_kind_whose_sender_is_missing_fails_the_senders_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of ``SINK_KINDS`` naming no function of ``senders`` is found when
    the senders load (the watcher starts), not when its first alert goes."""
    from dflash_watch.sinks import senders, settings

    kinds = (*settings.SINK_KINDS, settings.SinkKind("pager", sender="pager_sender"))
    monkeypatch.setattr(senders, "SINK_KINDS", kinds)  # as the module-level build reads it
    with pytest.raises(ImportError, match=r"sink kind 'pager': senders.pager_sender is not defined"):
        senders._factories()


def test_reading_sink_tables_never_loads_the_senders() -> None:
    """The kinds are declared where configs are read, without importing the
    HTTP senders (urllib, sockets) that only a live session needs."""
    code = ("import sys; from dflash_watch.config import load_config; "
            "import dflash_watch.sinks.settings as s; s.parse_sink({'kind': 'slack', 'url_env': 'X'}); "
            "print('dflash_watch.sinks.senders' in sys.modules, 'urllib.request' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
