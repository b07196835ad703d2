"""Provoke the FX-tracing-vs-torch.compile failure with the real torch and
feed what Python printed to the CrashAssembler.

What torch 2.13.0 (CPU) does here, seen in 10 of 10 runs of the two-thread
script: the thread running the compiled target model dies, printed by
``threading.excepthook`` as ``Exception in thread target-server:``, with
either ``RuntimeError: Detected that you are using FX to symbolically trace a
dynamo-optimized function`` (it saw the tracer's process-global flag) or
``NameError: module is not installed as a submodule`` (its module call went
through the tracer's process-global ``nn.Module.__call__`` patch), roughly
6:4. The tracing thread survives. On torch >= 2.14 only the second form can
occur. Either way the assembler must report ``fx_tracing``.

Run this file as a script to refresh the fixtures under
tests/fixtures/tracebacks/ (named with the torch version) that the core
tests use without torch.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed; real tracebacks need it")

from parsers.events import Crash  # noqa: E402
from parsers.tracebacks import CrashAssembler  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"
ROOT = Path(__file__).resolve().parents[2]

ONE_THREAD = textwrap.dedent("""\
    import torch, torch.fx

    @torch.compile(backend="eager")
    def scaled(x):
        return torch.sin(x) * 2

    class Drafter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return scaled(self.proj(x))

    torch.fx.symbolic_trace(Drafter())
""")

# Thread A serves a compiled target model in a loop; thread B FX-traces a
# drafter with many submodule calls, so B spends most of its time inside the
# tracer and A's next call lands there. Either thread's failure stops both.
TWO_THREADS = textwrap.dedent("""\
    import threading, time, torch, torch.fx

    @torch.compile(backend="eager")
    def attend(x):
        return torch.softmax(x @ x.T, dim=-1) @ x

    class Target(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)

        def forward(self, x):
            return attend(self.norm(x))

    class Drafter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(64))

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x

    target = Target()
    x = torch.randn(4, 8)
    target(x)  # compile before the race starts
    stop = threading.Event()

    def serve():
        try:
            while not stop.is_set():
                target(x)
        finally:
            stop.set()

    def draft():
        deadline = time.monotonic() + 20
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                torch.fx.symbolic_trace(Drafter())
        finally:
            stop.set()

    a = threading.Thread(target=serve, name="target-server")
    b = threading.Thread(target=draft, name="drafter-trace")
    a.start(); b.start(); a.join(); b.join()
""")


def run_script(source: str) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=90, cwd=ROOT,
    )
    return proc.returncode, proc.stderr


def assemble(text: str) -> list[Crash]:
    assembler = CrashAssembler("stderr")
    out = []
    for i, line in enumerate(text.split("\n"), 1):
        out += assembler.feed(line, i, float(i))
    out += assembler.flush(0.0)
    return [e for e in out if isinstance(e, Crash)]


@pytest.mark.slow
def test_symbolic_trace_of_a_module_calling_a_compiled_function() -> None:
    code, stderr = run_script(ONE_THREAD)
    assert code == 1
    assert "Detected that you are using FX to symbolically trace a dynamo-optimized function" in stderr
    [crash] = assemble(stderr)
    assert (crash.detector, crash.cause, crash.exc_type, crash.thread) == (
        "fx_tracing", "nested_fx_trace", "RuntimeError", None)
    assert any(f.function == "symbolic_trace" for f in crash.frames)


@pytest.mark.slow
def test_tracing_thread_against_compiled_thread() -> None:
    code, stderr = run_script(TWO_THREADS)
    assert code == 0  # a thread's exception does not fail the process
    printed = stderr.count("Exception in thread ")
    assert printed >= 1, f"the race did not happen on torch {torch.__version__}:\n{stderr[-2000:]}"
    found = assemble(stderr)
    assert len(found) == printed
    for crash in found:
        assert crash.detector == "fx_tracing", crash
        assert crash.thread in {"target-server", "drafter-trace"}
        assert crash.cause in {"nested_fx_trace", "foreign_module_call", "module_stack_corrupted"}


def refresh_fixtures() -> None:
    """Write the captured tracebacks as fixtures (run this file as a script)."""
    version = torch.__version__.split("+")[0]
    FIXTURES.mkdir(parents=True, exist_ok=True)
    _, one = run_script(ONE_THREAD)
    (FIXTURES / f"fx_symbolic_trace_of_compiled_fn_one_thread_torch{version}.txt").write_text(one, encoding="utf-8")
    wanted = {"RuntimeError": "detected", "NameError": "nameerror"}
    for _ in range(20):
        _, two = run_script(TWO_THREADS)
        for exc, tag in list(wanted.items()):
            if f"\n{exc}: " in two:
                path = FIXTURES / f"fx_trace_vs_compiled_thread_{tag}_torch{version}.txt"
                path.write_text(two, encoding="utf-8")
                del wanted[exc]
        if not wanted:
            break


if __name__ == "__main__":
    refresh_fixtures()
