"""The training job inherits none of the watcher's alert secrets.

The sinks read webhook URLs and routing keys from the environment
(``url_env``, ``routing_key_env``); a job started by ``dflash-watch start``
from the same shell must not carry them in ``/proc/<pid>/environ``, and a
tmux server that start brings up must not hold them for later panes.
Real tmux server on a private socket, real trainer.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tmux_job_helpers import long_cmd, marked_pids, ns, trainer_pids

from dflash_watch.control import cli_actions
from dflash_watch.control.secrets import clean_environ, secret_names
from dflash_watch.control.survivors import RUN_ID_ENV


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode("utf-8", "replace").partition("=")[::2] for item in raw if item)


def test_the_job_lacks_the_sink_secrets_the_watcher_has(tmux, tmp_path, marker, monkeypatch):
    tag = uuid.uuid4().hex[:8].upper()
    hook, key = f"DFW_HOOK_{tag}", f"DFW_PD_KEY_{tag}"
    url = f"https://hooks.example.invalid/T000/{tag}"
    monkeypatch.setenv(hook, url)
    monkeypatch.setenv(key, f"routing-{tag}")
    monkeypatch.setenv(f"DFW_COPY_{tag}", url)  # the same secret exported under a second name
    monkeypatch.setenv(f"DFW_PLAIN_{tag}", "kept")
    config = tmp_path / "dfw.toml"
    config.write_text(
        "[run]\n"
        f"command = {json.dumps(long_cmd(tmp_path, marker))}\n"
        f"session = \"job\"\nsocket = {json.dumps(tmux.socket)}\n"
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}\ngrace_s = 1.0\n"
        "[run.env]\nDFW_TEST = \"1\"\n"
        "[[alerts.sink]]\nkind = \"slack\"\n"
        f"url_env = \"{hook}\"\n"
        "[[alerts.sink]]\nkind = \"pagerduty\"\n"
        f"routing_key_env = \"{key}\"\n"
    )
    args = ns(config=str(config), grace=1.0)
    assert cli_actions.cmd_start(args) == 0
    (pid,) = trainer_pids(tmp_path)
    env = environ_of(pid)
    values = "\n".join(env.values())
    assert url not in values and f"routing-{tag}" not in values
    assert hook not in env and key not in env and f"DFW_COPY_{tag}" not in env
    assert env[f"DFW_PLAIN_{tag}"] == "kept" and env["DFW_TEST"] == "1" and env.get(RUN_ID_ENV)
    # the server this start brought up holds none of them for the panes that come later
    shown = tmux.run("show-environment", "-g").stdout
    assert url not in shown and f"routing-{tag}" not in shown
    # while the watcher itself still has them (its sinks need them)
    import os

    assert os.environ[hook] == url
    assert cli_actions.cmd_abort(args) == 0
    assert not marked_pids(marker)


def test_a_server_started_by_someone_else_with_the_secret_does_not_pass_it_on(tmux, tmp_path, marker, monkeypatch):
    """The user's own server (its global environment holds the secret): the wrapper drops it."""
    tag = uuid.uuid4().hex[:8].upper()
    hook = f"DFW_HOOK_{tag}"
    monkeypatch.setenv(hook, f"https://hooks.example.invalid/{tag}")
    tmux.run("new-session", "-d", "-s", "user")  # started with the secret in its environment
    assert hook in tmux.run("show-environment", "-g").stdout
    config = tmp_path / "dfw.toml"
    config.write_text(
        "[run]\n"
        f"command = {json.dumps(long_cmd(tmp_path, marker))}\n"
        f"session = \"job\"\nsocket = {json.dumps(tmux.socket)}\n"
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}\n"
        f"[[alerts.sink]]\nkind = \"webhook\"\nurl_env = \"{hook}\"\n"
    )
    args = ns(config=str(config), grace=1.0)
    assert cli_actions.cmd_start(args) == 0
    (pid,) = trainer_pids(tmp_path)
    assert hook not in environ_of(pid)
    assert cli_actions.cmd_abort(args) == 0


def test_secret_names_follow_values_and_leave_the_rest():
    env = {"A": "s3cret", "B": "s3cret", "C": "other", "D": ""}
    assert secret_names(("A", "MISSING"), env) == ("A", "B", "MISSING")
    assert clean_environ(("A",), env) == {"C": "other", "D": ""}
