"""The dashboard's keys by id, and the ``[keys]`` table that rebinds them.

Every binding of the dashboard (``tui/app.py`` ``BINDINGS``), of its
modal screens (``tui/screens/``) and of the log panel's filter carries an
``id``; ``[keys]`` maps ids to Textual key strings (``abort = "ctrl+a"``,
several keys comma-separated: ``help = "question_mark,h"``), and the app
hands the checked table to ``App.set_keymap`` (posting's habit). The ids
and default keys are declared here, without Textual, so that a config is
checked when it is loaded (exit 2 with one line, like any config error)
by commands that never draw a screen; a test keeps them equal to the
``BINDINGS`` of the app and of each screen.

A binding's ``scope`` is where it acts: ``dashboard`` (the app and its
widgets), or one modal screen (``help``, ``confirm``, ``evidence``,
``diagnosis``), which sees only its own keys (Textual's modal binding
chain). Two bindings may share a key only in different scopes: ``q``
quits the dashboard and closes the help.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError, hint, show


@dataclass(frozen=True, slots=True)
class Key:
    """One binding: its default key string (Textual's spelling), what it does,
    and where it acts (``dashboard`` or a modal screen's name)."""

    default: str
    doc: str
    scope: str = "dashboard"


KEY_BINDINGS: dict[str, Key] = {
    "start": Key("s", "start the job"),
    "abort": Key("a", "abort the job (asks first)"),
    "relaunch": Key("r", "relaunch the job"),
    "baseline": Key("b", "save the last minutes as the baseline"),
    "diagnose": Key("d", "what changed since the good run"),
    "acknowledge": Key("m", "acknowledge firing alerts (the bell stops)"),
    "filter": Key("slash", "filter the log view"),
    "next_file": Key("f", "next log file"),
    "toggle_follow": Key("p", "pause or resume following the log"),
    "help": Key("question_mark", "the help screen"),
    "open_alert": Key("enter", "the highlighted alert's evidence"),
    "window_10m": Key("1", "charts: the last 10 minutes"),
    "window_1h": Key("2", "charts: the last hour (the default)"),
    "window_6h": Key("3", "charts: the last 6 hours"),
    "window_all": Key("4", "charts: the whole run"),
    "processes": Key("g", "show or hide the GPU process table"),
    "quit": Key("q", "quit the dashboard (the job keeps running)"),
    "clear_filter": Key("escape", "the log filter: clear it"),
    # The modal screens: each sees only its own keys.
    "help_close": Key("escape,q,question_mark", "the help screen: close it", "help"),
    "confirm_yes": Key("y", "a confirmation: yes, do it", "confirm"),
    "confirm_no": Key("n,escape", "a confirmation: no, touch nothing", "confirm"),
    "evidence_close": Key("escape,q,enter", "an alert's evidence: close it", "evidence"),
    "diagnosis_close": Key("escape,q,d", "what changed: close it", "diagnosis"),
}

MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
# Textual's named keys (textual.keys.Keys, without modifiers) and the short
# names it gives some characters (REPLACED_KEYS, KEY_TO_UNICODE_NAME).
NAMED_KEYS = frozenset({
    "backspace", "delete", "down", "end", "enter", "escape", "home", "insert", "left", "pagedown",
    "pageup", "return", "right", "space", "tab", "up", "newline",
    *(f"f{i}" for i in range(1, 25)),
    "slash", "backslash", "at", "minus", "plus", "underscore",
    "hyphen_minus", "less_than_sign", "greater_than_sign",
})


def key_problem(text: str) -> str | None:
    """Why ``text`` is not a Textual key string, or None when it is.

    A key is a printable character (``a``, ``A``, ``/``), a named key
    (``escape``, ``f5``, ``pageup``) or a character's Unicode name in
    Textual's spelling (``question_mark``, ``full_stop``), after any
    modifiers (``ctrl+``, ``shift+``, ``alt+``, ...)."""
    keys = text.split(",")
    for key in keys:
        key = key.strip()
        if not key:
            return "must name a key (several: comma-separated)"
        *mods, base = key.split("+")
        bad_mod = next((m for m in mods if m not in MODIFIERS), None)
        if bad_mod is not None:
            return f"{bad_mod!r} is not a modifier (one of {', '.join(sorted(MODIFIERS))})"
        if not _is_key(base):
            return f"{base!r} is not a key (a character, a name like escape, f5, pageup, question_mark)"
    return None


def _is_key(base: str) -> bool:
    if len(base) == 1:
        return base.isprintable() and not base.isspace()
    if base in NAMED_KEYS:
        return True
    if not base.isascii() or not base.replace("_", "").isalnum() or base != base.lower():
        return False  # a name is lower-case letters, digits and _: `question_mark`, not `question mark`
    try:
        return len(unicodedata.lookup(base.replace("_", " ").upper())) == 1
    except KeyError:
        return False


# Textual's short names for some characters (textual.keys.KEY_NAME_REPLACEMENTS).
_SHORT_NAMES = {"solidus": "slash", "reverse_solidus": "backslash", "commercial_at": "at",
                "hyphen_minus": "minus", "plus_sign": "plus", "low_line": "underscore"}


def normalize(key: str) -> str:
    """One key in Textual's long form (``/`` -> ``slash``, ``ctrl+?`` ->
    ``ctrl+question_mark``), as Textual compares them: so that a clash
    between ``"/"`` and the default ``slash`` is seen."""
    *mods, base = key.strip().split("+")
    if len(base) == 1 and not base.isalnum():
        try:
            name = unicodedata.name(base).lower().replace("-", "_").replace(" ", "_")
        except ValueError:
            name = base
        base = _SHORT_NAMES.get(name, name)
    return "+".join([*mods, base])


def check_keys(raw: dict[str, Any]) -> dict[str, str]:
    """``[keys]`` as a checked keymap (id -> key string) for ``App.set_keymap``.

    An unknown id, a value that is not a key, or a key that two dashboard
    actions would share is a ``ConfigError`` naming the entry."""
    out: dict[str, str] = {}
    given: dict[str, str] = {}  # as written, for the messages
    for name, value in raw.items():
        if name not in KEY_BINDINGS:
            raise ConfigError(f"[keys] {name}: not a key binding id "
                              f"({hint(name, list(KEY_BINDINGS), many=len(KEY_BINDINGS))})")
        if not isinstance(value, str):
            raise ConfigError(f"[keys] {name} = {show(value)}: must be a key string (\"ctrl+a\", \"f5\")")
        why = key_problem(value)
        if why:
            raise ConfigError(f"[keys] {name} = {show(value)}: {why}")
        out[name] = ",".join(normalize(k) for k in value.split(","))
        given[name] = value
    owner: dict[tuple[str, str], str] = {}  # (scope, key) -> binding id
    for name, spec in KEY_BINDINGS.items():
        for one in out.get(name, spec.default).split(","):
            key = (spec.scope, one)
            if key in owner:
                other, mine = sorted((owner[key], name), key=lambda n: n not in out)
                raise ConfigError(f"[keys] {other} = {show(given[other])}: {one} is also the key of {mine}")
            owner[key] = name
    return out


def keys_of(binding_id: str, keymap: Mapping[str, str]) -> list[str]:
    """The keys of a binding after ``[keys]`` (``keymap``, as ``check_keys``
    returns it, or Textual's ``App._keymap``): what the help screen shows."""
    return [k.strip() for k in keymap.get(binding_id, KEY_BINDINGS[binding_id].default).split(",")]


def keys_template() -> str:
    """The commented ``[keys]`` table of the template, from ``KEY_BINDINGS``."""
    lines = [
        "[keys]",
        "# The dashboard's keys, by id, in Textual's spelling: a character, ctrl+x,",
        "# f5, escape, question_mark; several keys comma-separated. Defaults:",
    ]
    for name, spec in KEY_BINDINGS.items():
        lines.append(f"# {name} = {show(spec.default)}  # {spec.doc}")
    return "\n".join(lines) + "\n"
