"""`dflash-watch demo` as a newcomer meets it: in a real tmux pane.

1. The README's first Quick start command, run as written (install, then
   the demo): the dashboard paints, `q` leaves, nothing of the demo stays.
2. The demo's story at 90x: the FX-tracing crash shows on screen, `r`
   relaunches, the job is running again with a healthy phase.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pytest

from dflash_watch.control.tmux import Tmux

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quick start\s+```(?:bash)?\n(.*?)```", text, re.S)
    assert block, "README has no Quick start code block"
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2, commands
    return commands


class Pane:
    def __init__(self, command: str, width: int = 130, height: int = 42, env: dict[str, str] | None = None) -> None:
        self.socket = f"dfw-e2e-{uuid.uuid4().hex[:8]}"
        env = {k: v for k, v in (os.environ if env is None else env).items() if k not in ("COLUMNS", "LINES", "TMUX")}
        subprocess.run(
            ["tmux", "-L", self.socket, "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height),
             "-c", str(ROOT), command],
            check=True, env=env, timeout=10,
        )

    def screen(self) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True, timeout=10)
        return out.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", "-t", "t", *keys], check=True, timeout=10)

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.5)
        raise AssertionError(f"{pattern!r} not on screen after {timeout} s:\n{screen}")

    def wait_for_all(self, texts: list[str], timeout: float) -> str:
        """Textual paints panels in separate frames: wait until every text is there at once."""
        pattern = "(?s)" + "".join(f"(?=.*{re.escape(t)})" for t in texts)
        return self.wait_for(pattern, timeout)

    def close_modal(self) -> None:
        """Esc, then wait until the modal is gone: a key sent right after Esc
        would reach the app as Alt+key."""
        self.keys("Escape")
        deadline = time.monotonic() + 10
        while "what changed since" in self.screen():
            assert time.monotonic() < deadline, "Esc did not close the screen"
            time.sleep(0.3)
        time.sleep(0.3)

    def alive(self) -> bool:
        out = subprocess.run(["tmux", "-L", self.socket, "list-panes", "-a", "-F", "#{pane_dead}"], capture_output=True, text=True, timeout=10)
        return out.returncode == 0 and "0" in out.stdout.split()

    def close(self) -> None:
        Tmux(socket=self.socket).kill_server()  # (its socket file too)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class DemoProcesses:
    """The demo this test started and the simulator it started, found from
    the test's own tmux pane (its process tree, then the demo's private tmux
    server, whose name carries the demo's pid): never by scanning the
    machine's process table, where other people's jobs run."""

    def __init__(self, pane: Pane) -> None:
        self.pane = pane
        self.simulators: set[int] = set()

    def _demo_pids(self) -> list[int]:
        out = subprocess.run(["tmux", "-L", self.pane.socket, "list-panes", "-a", "-F", "#{pane_pid}"],
                             capture_output=True, text=True, timeout=10)
        todo = [int(p) for p in out.stdout.split() if p.isdigit()]
        found = []
        while todo:
            pid = todo.pop()
            if " demo" in _cmdline(pid) and "dflash_watch.demo.simulator" not in _cmdline(pid):
                found.append(pid)
            todo += _children(pid)
        return found

    def remember(self) -> None:
        """Note the simulator's pid while the demo runs."""
        for demo in self._demo_pids():
            out = subprocess.run(["tmux", "-L", f"dfw-demo-{demo}", "list-panes", "-a", "-F", "#{pane_pid}"],
                                 capture_output=True, text=True, timeout=10)
            todo = [int(p) for p in out.stdout.split() if p.isdigit()]
            while todo:
                pid = todo.pop()
                if "dflash_watch.demo.simulator" in _cmdline(pid):
                    self.simulators.add(pid)
                todo += _children(pid)

    def leftovers(self) -> list[int]:
        return [p for p in self.simulators if "dflash_watch.demo.simulator" in _cmdline(p)]


def venv_of_its_own(where: Path) -> dict[str, str]:
    """The environment of a new venv at ``where`` that sees this one's
    packages (a ``.pth``), for the README's ``pip install -e .``: it
    installs this checkout there, and the developer's own environment, whose
    editable install may point at another checkout, is left as it was."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    found = subprocess.run([str(where / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True, timeout=30)
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(found.stdout.strip()) / "_outer_packages.pth").write_text("".join(f"{p}\n" for p in paths))
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(where)
    env["PATH"] = f"{where / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONHOME", None)
    return env


def test_readme_quickstart_demo_runs_as_written_and_quits_cleanly(tmp_path: Path) -> None:
    install_and_demo, _ = quickstart_commands()
    assert install_and_demo.rstrip().endswith("dflash-watch demo")
    venv = tmp_path / "venv"
    pane = Pane(f"{install_and_demo}; sleep 30", env=venv_of_its_own(venv))
    try:
        pane.wait_for(r"dflash-demo", timeout=240)
        pane.wait_for(r"GPU 7", timeout=60)
        pane.wait_for(r"step [\d,]+/50,000", timeout=90)
        pane.wait_for_all(["q quit", "throughput", "alerts"], timeout=10)
        demo = DemoProcesses(pane)
        demo.remember()
        assert demo.simulators, "the demo's simulator was not found under the test's pane"
        pane.keys("q")
        deadline = time.monotonic() + 20
        while demo.leftovers() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert demo.leftovers() == []
        assert (venv / "bin" / "dflash-watch").exists(), "the install went elsewhere than the test's venv"
    finally:
        pane.close()


def test_demo_story_crash_then_one_key_relaunch() -> None:
    pane = Pane("python3 -m dflash_watch.cli demo --speed 90")
    demo = DemoProcesses(pane)
    try:
        pane.wait_for(r"VOLATILE", timeout=90)
        demo.remember()
        assert demo.simulators, "the demo's simulator was not found under the test's pane"
        # `d`: what changed since the good run, padding first, the staged
        # environment's differences, the FX crash not blamed for the slowdown.
        pane.keys("d")
        # The screen follows the run: the padding and allocator symptoms that
        # come after the memory swings appear in it while it is open.
        pane.wait_for_all(["what changed since", "padding_efficiency", "package:transformers",
                           "package:accelerate", "alloc_thrash"], timeout=60)
        pane.close_modal()
        screen = pane.wait_for(r"fx_tracing", timeout=60)
        pane.wait_for_all(["exited 1", "relaunch"], timeout=30)
        pane.keys("d")
        screen = pane.wait_for_all(["what changed since", "crash:fx_tracing"], timeout=30)
        first = re.search(r"1\. (\S+)", screen)
        assert first and first.group(1) == "padding_efficiency", screen
        pane.close_modal()
        pane.keys("r")
        screen = pane.wait_for(r"running dflash-demo .* restarts 1", timeout=30)
        # The relaunch warms up and comes back healthy at 21-25 Ktok/s.
        screen = pane.wait_for(r"\b2[1-5]\.\d Ktok/s vs", timeout=90)
        assert "no alerts" in screen or "firing" not in screen.splitlines()[0]
        pane.keys("q")
    finally:
        pane.close()
    deadline = time.monotonic() + 20
    while demo.leftovers() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert demo.leftovers() == []


def test_replay_on_a_terminal_opens_the_finished_run_in_the_dashboard() -> None:
    log = "examples/dflash_broken_batching_fx_crash.log"
    gpu = "examples/dflash_broken_batching_fx_crash.gpu.jsonl"
    pane = Pane(f"python3 -m dflash_watch.cli replay --tz UTC {log} --gpu-samples {gpu}; echo REPLAY-EXITED; sleep 30")
    try:
        # the alert, the GPU tiles' badge, the header, and the log's last lines
        pane.wait_for_all(
            ["fx_tracing", "VOLATILE", "no job to control", "RuntimeError: Detected that you are using FX"],
            timeout=60,
        )
        pane.keys("q")
        pane.wait_for(r"REPLAY-EXITED", timeout=15)
    finally:
        pane.close()


def test_the_dashboard_starts_again_from_its_code_cache(tmp_path: Path) -> None:
    """Where Python writes bytecode (these machines set PYTHONDONTWRITEBYTECODE;
    users usually do not), the first start keeps what it compiled
    (``dflash_watch/code_cache.py``: Textual's and our dataclasses' code, the
    scanner's database) and the next start runs from it: the same dashboard
    paints, `q` leaves, and nothing new is written."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    stamps = []
    for _ in range(2):
        pane = Pane("python3 -m dflash_watch.cli demo --speed 90; sleep 30", env=env)
        demo = DemoProcesses(pane)
        try:
            pane.wait_for(r"GPU 7", timeout=90)
            pane.wait_for(r"step [\d,]+/50,000", timeout=90)
            pane.wait_for_all(["q quit", "throughput", "alerts"], timeout=10)
            demo.remember()
            pane.keys("q")
            deadline = time.monotonic() + 20
            while demo.leftovers() and time.monotonic() < deadline:
                time.sleep(0.5)
            assert demo.leftovers() == []
            deadline = time.monotonic() + 20  # (written at the demo's exit)
            while not (found := list((tmp_path / "pycache").rglob("generated_code.*"))) and time.monotonic() < deadline:
                time.sleep(0.5)
            (cache,) = found
            stamps.append((cache.stat().st_mtime_ns, cache.stat().st_size))
        finally:
            pane.close()
    assert stamps[0] == stamps[1], "the second start compiled what the first had kept"
    from dflash_watch.code_cache import CodeCache

    codes = CodeCache(str(cache)).codes
    assert any("_type_" in text for text in codes) and len(codes) > 300  # ours and Textual's classes
