"""The watcher's secrets, kept from the training job it starts.

Why: the alert sinks read webhook URLs and routing keys from environment
variables (``url_env``, ``routing_key_env`` in ``[[alerts.sink]]``). A
training started from the same shell would inherit them, and a training's
environment is not private: it is in ``/proc/<pid>/environ``, in crash
dumps, in the wandb/mlflow run metadata many scripts upload. So the
wrapper is told to drop them (``--unset``), and tmux runs without them, so
a server it starts (whose global environment every later pane inherits)
never holds them either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping


def secret_names(secret_env: tuple[str, ...], environ: Mapping[str, str]) -> tuple[str, ...]:
    """The variables to keep from the training: the named secrets, and any other
    variable of ``environ`` holding one of their values (a URL exported twice)."""
    values = {environ[n] for n in secret_env if environ.get(n)}
    names = set(secret_env) | {k for k, v in environ.items() if v and v in values}
    return tuple(sorted(names))


def clean_environ(secret_env: tuple[str, ...], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` without the secrets: what tmux runs with, so a server it starts never holds them."""
    env = dict(os.environ if environ is None else environ)
    for name in secret_names(secret_env, env):
        env.pop(name, None)
    return env


def sink_secret_names(sinks: Iterable[object]) -> tuple[str, ...]:
    """The variable names the sinks of ``[alerts]`` read their secrets from."""
    names: list[str] = []
    for sink in sinks:
        for attr in ("url_env", "routing_key_env"):
            value = getattr(sink, attr, None)
            if value and value not in names:
                names.append(str(value))
    return tuple(names)
