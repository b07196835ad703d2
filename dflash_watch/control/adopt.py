"""Taking over a pane the user started by hand: what ran there, and where.

A user often starts the training in a tmux pane themselves (``python
train.py 2>&1 | tee train.log`` at a shell prompt) and points dflash-watch
at the session with ``--session``. When that run crashes, `r` can take the
pane over: respawn it with the same command and working directory, run by
the wrapper, so from then on the job is a managed one (its exit recorded,
relaunch one key). This module finds out what "the same command" is:

- while the training lives, the shell's foreground process group is it:
  ``/proc/<pid>/cmdline`` and ``/proc/<pid>/cwd`` of its leader, and the
  line the user typed at the prompt when the pane's history still shows it
  (that keeps pipes and redirections the argv has lost). :class:`Foreground`
  is that reading, kept by the Job from its status polls, so it is still
  known after the training died;
- after it died, the pane shows a shell prompt: the last command line in
  the pane's history is a guess the user must confirm (or replace with
  ``--cmd``); a pane created with a command (``tmux new -s x 'python
  train.py'``) has it in ``#{pane_start_command}``.

Nothing here acts on the pane; :meth:`Job.take_over` does, after the user
confirmed the :class:`Adoption` this module describes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ..procfs import (
    SHELLS,
    proc_cmdline,
    proc_cwd,
    proc_environ,
    proc_foreground_pgid,
    proc_group,
    proc_name,
    proc_ppid,
    proc_tree,
)
from .tmux import Tmux, TmuxError

_PANE_FORMAT = "#{pane_pid}\t#{pane_dead}\t#{pane_current_path}\t#{session_path}\t#{pane_start_command}"
# Variables a shell sets for every child: not the user's own settings.
_SHELL_SET = frozenset({"_", "SHLVL", "OLDPWD", "PWD", "LINES", "COLUMNS", "TERM", "TMUX", "TMUX_PANE"})
_PROMPT_END = re.compile(r"[$#%>❯»] ")
HISTORY_LINES = 2000


@dataclass(frozen=True, slots=True)
class Foreground:
    """The shell's foreground job as read from /proc while it lived."""

    pgid: int
    argv: tuple[str, ...]
    cwd: str | None
    env: tuple[tuple[str, str], ...] = ()
    stages: tuple[tuple[str, ...], ...] = ()  # argv of each member of the group (a pipeline)

    @property
    def command(self) -> str:
        """The argv as a shell line; a pipeline's members joined with ``|`` (redirections are not in /proc)."""
        stages = self.stages or (self.argv,)
        return " | ".join(shlex.join(s) for s in stages if s)


@dataclass(frozen=True, slots=True)
class Adoption:
    """What taking over ``pane`` would run, and what it would end.

    ``certain``: the command was read from the process (or given with
    --cmd), not guessed from the pane's history. ``replaces``: the live
    process that ``respawn-pane -k`` ends (the user's shell at its prompt),
    None when the pane is dead. ``running``: training processes still alive,
    which are stopped (Ctrl-C, SIGTERM, SIGKILL) before anything else.
    """

    session: str
    pane: str
    pane_pid: int
    command: str
    cwd: str | None
    source: str
    certain: bool
    replaces: str | None = None
    running: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def known(self) -> bool:
        return bool(self.command.strip())

    def lines(self) -> list[tuple[str, str]]:
        """(label, text) rows for a confirmation: the question never hides what it does."""
        rows = [("pane", f"{self.pane} of session {self.session} (started by hand, not by dflash-watch)"),
                ("command", self.command or "(unknown: pass --cmd)"),
                ("from", self.source + ("" if self.certain else ": a guess, check it")),
                ("cwd", self.cwd or "(unknown: the session's default)")]
        if self.env:
            rows.append(("env", " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)[:300]))
        if self.running:
            rows.append(("will stop", f"{len(self.running)} training processes "
                                      f"({', '.join(map(str, self.running[:12]))}): Ctrl-C, SIGTERM, SIGKILL"))
        then = (f"respawn the pane (tmux respawn-pane -k, ending {self.replaces})" if self.replaces
                else "respawn the dead pane")
        rows.append(("then", then + " with this command as a managed job: its exit is recorded "
                             "and the next relaunch is one key"))
        if not self.certain:
            rows.append(("or", "answer n and start dflash-watch again with --cmd \"...\" (and --cwd) to say it"))
        return rows


def read_foreground(shell_pid: int) -> Foreground | None:
    """The shell's live foreground job, None at the prompt (or when /proc says nothing)."""
    fg = proc_foreground_pgid(shell_pid)
    if fg is None or fg == shell_pid:
        return None
    members = proc_group(fg)
    if not members:
        return None
    leader = fg if fg in members else members[0]
    argv = proc_cmdline(leader)
    if not argv:
        return None
    # The shell's direct children are the pipeline's stages; what they fork (workers) is not.
    stages = tuple(a for a in (proc_cmdline(p) for p in members if p == leader or proc_ppid(p) == shell_pid) if a)
    return Foreground(fg, argv, proc_cwd(leader), _env_added(leader, shell_pid), stages)


def _env_added(pid: int, shell_pid: int) -> tuple[tuple[str, str], ...]:
    """What the training's environment has beyond the shell's initial one (exported later, or inline)."""
    mine, base = proc_environ(pid), proc_environ(shell_pid)
    if not mine:
        return ()
    return tuple(sorted((k, v) for k, v in mine.items() if k not in _SHELL_SET and base.get(k) != v))


def history_command(lines: list[str], hint: tuple[str, ...] = ()) -> str | None:
    """The last command line typed at a prompt in the pane's text.

    At a prompt, the last line is the prompt itself: earlier lines that
    start with the same prompt text and go on are commands typed there.
    Otherwise (the prompt changed, the training still prints) a line with a
    prompt end (``$ ``, ``# ``, ``% ``, ``> ``) whose rest names the
    training's program (``hint``: its argv) is taken.
    """
    rows = [line.rstrip() for line in lines]
    while rows and not rows[-1]:
        rows.pop()
    if not rows:
        return None
    prompt = rows[-1]
    if _PROMPT_END.search(prompt + " ") and not hint:
        for line in reversed(rows[:-1]):
            if line.startswith(prompt) and line[len(prompt):].strip():
                return line[len(prompt):].strip()
    words = {w for w in (a.rsplit("/", 1)[-1] for a in hint[:3]) if w and len(w) > 1}
    for line in reversed(rows[:-1] if not hint else rows):
        for match in _PROMPT_END.finditer(line):
            rest = line[match.end():].strip()
            if rest and (not words or any(w in rest for w in words)):
                return rest
    return None


def survey(tmux: Tmux, session: str, pane: str, seen: Foreground | None, command: str = "",
           cwd: str | None = None) -> Adoption | None:
    """What a takeover of ``pane`` would do. ``seen``: the foreground job remembered
    from earlier looks; ``command``/``cwd``: what the user configured (--cmd wins).
    None when the pane is gone."""
    try:
        out = tmux.run("display-message", "-p", "-t", pane, _PANE_FORMAT).stdout.rstrip("\n")
    except TmuxError:
        return None
    parts = out.split("\t", 4)
    if len(parts) < 5 or not parts[0].isdigit():
        return None
    pane_pid, dead, pane_cwd, session_cwd, start_command = int(parts[0]), parts[1] == "1", *parts[2:]
    # tmux cannot read a dead pane's directory: the session's start directory is where it began.
    pane_cwd = pane_cwd or session_cwd
    name = proc_name(pane_pid) if not dead else ""
    shell = not dead and name in SHELLS
    live = read_foreground(pane_pid) if shell else None
    running: tuple[int, ...] = ()
    if live is not None:
        running = tuple(p for p in proc_tree(pane_pid) if p != pane_pid)
    elif not dead and not shell:
        running = proc_tree(pane_pid)  # the pane's own process is the training
    replaces = f"the shell {name} (pid {pane_pid})" if shell else (None if dead else f"{name or 'pid'} {pane_pid}")
    env = live.env if live else (seen.env if seen else ())
    # A typed line ran from the shell's directory (it may cd itself); tmux's
    # pane_current_path is the foreground process's while the training runs.
    shell_cwd = (proc_cwd(pane_pid) if shell else None) or pane_cwd or None
    if command.strip():
        return Adoption(session, pane, pane_pid, command.strip(), cwd or shell_cwd, "--cmd", True,
                        replaces, running, env)
    history = _history(tmux, pane)
    fg = live or seen
    if fg is not None:
        typed = history_command(history, fg.argv)
        if typed:
            return Adoption(session, pane, pane_pid, typed, shell_cwd or fg.cwd, (
                f"the line typed at the prompt, matching pid {fg.pgid} ({shlex.join(fg.argv)[:80]})"), True,
                replaces, running, env)
        return Adoption(session, pane, pane_pid, fg.command, fg.cwd or pane_cwd or None,
                        f"/proc/{fg.pgid}/cmdline while it ran", True, replaces, running, env)
    if not shell and start_command.strip():
        return Adoption(session, pane, pane_pid, _unquote(start_command), cwd or pane_cwd or None,
                        "the pane's start command (#{pane_start_command})", True, replaces, running, env)
    if not shell and not dead and running:
        argv = proc_cmdline(pane_pid)
        if argv:
            return Adoption(session, pane, pane_pid, shlex.join(argv), proc_cwd(pane_pid) or pane_cwd or None,
                            f"/proc/{pane_pid}/cmdline", True, replaces, running, env)
    typed = history_command(history) if shell else None
    if typed:
        return Adoption(session, pane, pane_pid, typed, shell_cwd,
                        "the last command line in the pane's history (the training already ended)", False,
                        replaces, running, env)
    return Adoption(session, pane, pane_pid, "", pane_cwd or None, "nothing: the pane shows no command line",
                    False, replaces, running, env)


def _history(tmux: Tmux, pane: str) -> list[str]:
    try:
        return tmux.run("capture-pane", "-p", "-J", "-t", pane, "-S", f"-{HISTORY_LINES}").stdout.splitlines()
    except TmuxError:
        return []


def _unquote(start_command: str) -> str:
    """tmux shows a start command given as one argument quoted ("python train.py"); a shell line wants it bare."""
    text = start_command.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            parts = shlex.split(text)
        except ValueError:
            return text
        if len(parts) == 1:
            return parts[0]
    return text

