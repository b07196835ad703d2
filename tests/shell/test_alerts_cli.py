"""`dflash-watch alerts test` as a user runs it: a real process, real loopback servers.

One line per sink, ok or failed with the reason; exit 0 all ok, 1 any
failed, 2 no sinks or a bad config. A secret URL never appears.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from loopback_http import LoopbackServer, refused_url

ROOT = Path(__file__).resolve().parents[2]


def _alerts_test(tmp_path: Path, config: str, *flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "c.toml").write_text(config)
    return subprocess.run([sys.executable, "-m", "dflash_watch.cli", "alerts", "test", "--config",
                           str(tmp_path / "c.toml"), *flags], cwd=tmp_path, capture_output=True, text=True,
                          timeout=30, env={**os.environ, **(env or {})})


def test_each_sink_gets_one_test_alert_and_one_line_of_result(tmp_path: Path) -> None:
    with LoopbackServer() as ok, LoopbackServer([500]) as bad, LoopbackServer(default="hang") as stuck:
        secret = ok.url + "/T0/B0/xoxSECRET"
        config = (
            f'[[alerts.sink]]\nkind = "slack"\nurl_env = "DFW_TEST_SLACK"\nmin_severity = "critical"\n'
            f'[[alerts.sink]]\nkind = "webhook"\nurl = "{bad.url}"\n'
            f'[[alerts.sink]]\nkind = "ntfy"\nurl = "{refused_url()}"\n'
            f'[[alerts.sink]]\nkind = "webhook"\nurl = "{stuck.url}"\n'
            f'[[alerts.sink]]\nkind = "command"\nargv = ["{sys.executable}", "-c", "import sys; sys.stdin.read()"]\n'
        )
        t0 = time.monotonic()
        out = _alerts_test(tmp_path, config, "--timeout", "1.5", env={"DFW_TEST_SLACK": secret})
        took = time.monotonic() - t0
        (slack_post,) = ok.wait_for(1)
        assert len(bad.received) == 1  # tried once, no retries: this is a test
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines() == [
        "ok      slack[0] (url from $DFW_TEST_SLACK)",
        "failed  webhook[0]: HTTP 500 Internal Server Error",
        "failed  ntfy[0]: connection refused",
        "failed  webhook[1]: no answer within 1.5 s",
        "ok      command[0]",
    ]
    assert took < 6.0  # the sinks are tried side by side: one timeout, not one per sink
    assert "SECRET" not in out.stdout + out.stderr and "127.0.0.1" not in out.stdout + out.stderr
    # Sent despite min_severity = "critical": the test alert skips the filters.
    text = json.loads(slack_post.body)["text"]
    assert "info: test" in text and "this sink works" in text


def _in_process(tmp_path: Path, config: str, *flags: str, capsys) -> tuple[int, str, str]:
    """The same command through ``cli.main`` in this process (no interpreter start-up)."""
    from dflash_watch.cli import main

    (tmp_path / "c.toml").write_text(config)
    code = main(["alerts", "test", "--config", str(tmp_path / "c.toml"), *flags])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_all_ok_exits_0(tmp_path: Path, capsys) -> None:
    with LoopbackServer() as ok:
        result = _in_process(tmp_path, f'[[alerts.sink]]\nkind = "webhook"\nurl = "{ok.url}"\n', capsys=capsys)
        (post,) = ok.wait_for(1)
    assert result == (0, "ok      webhook[0]\n", "")
    sent = json.loads(post.body)
    assert (sent["detector"], sent["state"], sent["severity"]) == ("test", "firing", "info")


def test_no_sinks_or_a_bad_config_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    code, out, err = _in_process(tmp_path, 'alerts_file = "a.jsonl"\n', capsys=capsys)
    assert (code, out) == (2, "")
    assert err == f"dflash-watch: no [[alerts.sink]] tables in {tmp_path / 'c.toml'}\n"
    code, out, err = _in_process(tmp_path, '[[alerts.sink]]\nkind = "slack"\nurl_env = "X"\nretries = "3"\n',
                                 capsys=capsys)
    assert code == 2 and err == 'dflash-watch: [alerts.sink slack[0]] retries = "3": must be a whole number\n'
    code, out, err = _in_process(tmp_path, '[[alerts.sink]]\nkind = "bell"\n', "--timeout", "0", capsys=capsys)
    assert code == 2 and err.startswith("dflash-watch: --timeout 0.0: must be")
