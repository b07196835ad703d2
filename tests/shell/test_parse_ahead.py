"""Replay with the log parsed in a forked child (``dflash_watch.parse_ahead``).

The child's batches must be the batches ``log_batches`` makes here, event
for event (types and reprs), with the same notices and end time, on every
fixture log, the 20 shared real-world logs (skipped where absent), seeded
random logs and the benchmark shapes; the command must print the same with
and without it, and fork where it should. Around the fork: an error of the
child's is raised here as it was raised there, a child killed mid-way is
one clear error, a reader that stops early leaves no child behind, and the
child neither flushes what this process had buffered nor runs its exit
handlers, and leaves Ctrl-C to this process.

The forks run in processes of their own (``parse_ahead_check.py`` and small
scripts): pytest's workers run threads, and a process with threads is one
that ``parse_ahead.chosen`` never forks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dflash_watch import parse_ahead
from dflash_watch.parsers.events import Crash, Progress, Tick
from tests.random_logs import random_log

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
REALWORLD = ROOT.parent / "shared" / "realworld"
CHECK = ROOT / "tests" / "shell" / "parse_ahead_check.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from speed_logs import write_log  # noqa: E402


def env() -> dict[str, str]:
    out = dict(os.environ, PYTHONPATH=str(ROOT))
    out.pop("PYTHONUNBUFFERED", None)  # users run without it: the child's inherited buffers are real
    out.pop(parse_ahead.OFF_ENV, None)
    return out


def python(*argv: str, extra: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], env={**env(), **(extra or {})}, capture_output=True, text=True, timeout=timeout,
        cwd=ROOT,
    )


def compared(paths: list[Path]) -> list[str]:
    done = python(str(CHECK), "compare", *map(str, paths))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(paths)
    return lines


def assert_same(paths: list[Path]) -> None:
    differ = [line for line in compared(paths) if not line.startswith("same ")]
    assert not differ, differ


def test_every_fixture_log_parses_the_same_in_a_child() -> None:
    logs = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".txt"))
    assert len(logs) > 40
    assert_same(logs)


@pytest.mark.skipif(not REALWORLD.is_dir(), reason=f"{REALWORLD} not present")
def test_every_shared_log_parses_the_same_in_a_child() -> None:
    logs = sorted(REALWORLD.glob("*.log"))
    assert len(logs) == 20
    assert_same(logs)


def test_random_logs_and_the_benchmark_shapes_parse_the_same_in_a_child(tmp_path: Path) -> None:
    logs = [random_log(tmp_path / f"random-{seed}.log", seed, lines=6000) for seed in range(8)]
    for shape in ("quiet", "progress", "ranks", "nan"):
        write_log(tmp_path / f"{shape}.log", 30_000, shape, seed=5)
        logs.append(tmp_path / f"{shape}.log")
    # Notices on the way and at the end: a line cut at 1 MiB early on, with
    # MiBs of step lines after it; Lightning's banner with no progress after it.
    cut, banner = tmp_path / "cut.log", tmp_path / "banner.log"
    step = "11/29/2026 10:{:02d}:{:02d} - INFO - __main__ - step {} | loss 2.5 | 20.0 Ktok/s\n"
    with cut.open("w") as out:
        out.write("11/29/2026 09:59:59 - INFO - data " + "x" * (3 << 19) + "\n")
        for i in range(40_000):
            out.write(step.format(i // 3600 % 60, i // 60 % 60, i + 1))
    banner.write_text(
        "11/29/2026 09:59:00 - INFO - GPU available: True (cuda), used: True\n"
        "11/29/2026 11:30:00 - INFO - still here\n"
    )
    logs += [cut, banner]
    lines = compared(logs)
    assert all(line.startswith("same ") for line in lines), [x for x in lines if not x.startswith("same ")]
    # Several batches each, so that the pipe carries more than one message.
    assert all(int(line.split()[2]) >= 3 for line in lines[-6:-1]), lines[-6:-1]
    assert lines[-2].endswith("notices: 1") and lines[-1].endswith("notices: 1"), lines[-2:]


# The children this process forks, by pid (ours to signal and to wait for).
FORKS = textwrap.dedent(
    """
    import os, sys, signal
    real = os.fork
    pids = []
    def fork():
        pid = real()
        if pid:
            pids.append(pid)
        return pid
    os.fork = fork
    """
)
COUNTED = FORKS + textwrap.dedent(
    """
    from dflash_watch.cli import main
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.write(f"forks={len(pids)}\\n")
    sys.exit(code)
    """
)


def test_the_command_prints_the_same_and_forks_for_a_large_log(tmp_path: Path) -> None:
    log = tmp_path / "progress.log"
    write_log(log, 45_000, "progress", seed=2)
    assert log.stat().st_size >= parse_ahead.MIN_BYTES
    ahead = python("-c", COUNTED, "replay", "--json", str(log))
    here = python("-c", COUNTED, "replay", "--json", str(log), extra={parse_ahead.OFF_ENV: "0"})
    assert ahead.returncode == here.returncode == 0, (ahead.stderr, here.stderr)
    assert ahead.stdout == here.stdout
    assert ahead.stdout.count("\n") >= 3  # alerts to compare (drops, the crash)
    spare = len(os.sched_getaffinity(0)) - 1
    assert ahead.stderr.endswith(f"forks={min(1, spare)}\n"), ahead.stderr
    assert here.stderr.endswith("forks=0\n"), here.stderr
    assert ahead.stderr.removesuffix(f"forks={min(1, spare)}\n") == here.stderr.removesuffix("forks=0\n")


def test_baseline_save_diff_and_check_fork_and_say_the_same(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.log", tmp_path / "bad.log"
    write_log(good, 45_000, "progress", seed=2)
    write_log(bad, 45_000, "degraded", seed=2)
    spare = min(1, len(os.sched_getaffinity(0)) - 1)
    outs = []
    for extra, forks in (({}, spare), ({parse_ahead.OFF_ENV: "0"}, 0)):
        saved = tmp_path / f"baseline-{forks}.json"
        save = python("-c", COUNTED, "baseline", "save", str(good), "--out", str(saved), extra=extra)
        diff = python("-c", COUNTED, "baseline", "diff", str(bad), "--baseline", str(saved), "--json", extra=extra)
        assert save.returncode == 0 and diff.returncode in (0, 1), (save.stderr, diff.stderr)
        assert save.stderr.endswith(f"forks={forks}\n") and diff.stderr.endswith(f"forks={forks}\n")
        # check: the job's state (no tmux server on this socket) and the alerts firing now
        check = python("-c", COUNTED, "check", "--log", str(bad), "--json", "--socket", f"dfw-none-{os.getpid()}",
                       extra=extra)
        assert check.returncode in (0, 1, 2, 3), check.stderr
        assert check.stderr.endswith(f"forks={forks}\n"), check.stderr
        firing = sorted((a["detector"], a["kind"], a["source"]) for a in map(json.loads, check.stdout.splitlines())
                        if "detector" in a)
        outs.append((saved.read_text(), diff.stdout.replace(saved.name, "B"), firing))
    assert outs[0] == outs[1]
    assert '"what": "throughput"' in outs[0][1] and outs[0][2]


def test_the_code_cache_keeps_the_scanner_a_forked_replay_used(tmp_path: Path) -> None:
    """The child leaves by ``os._exit`` and writes nothing: the parser's
    database must be made in the parent, where the code cache keeps it."""
    pytest.importorskip("hyperscan", reason="the Hyperscan scanner needs the hyperscan package")
    from dflash_watch.code_cache import CodeCache

    log = tmp_path / "progress.log"
    write_log(log, 45_000, "progress", seed=2)
    extra = {"PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    first = subprocess.run(
        [sys.executable, "-m", "dflash_watch", "replay", "--json", str(log)], capture_output=True, text=True,
        env={k: v for k, v in {**env(), **extra}.items() if k != "PYTHONDONTWRITEBYTECODE"}, cwd=ROOT, timeout=240,
    )
    assert first.returncode == 0, first.stderr
    (found,) = (tmp_path / "pycache").rglob("generated_code.*")
    assert [key.split(" ", 1)[0] for key in CodeCache(str(found)).databases] == ["hyperscan"]


def test_many_logs_give_the_alerts_of_a_replay_here(tmp_path: Path) -> None:
    """Children for the largest logs (one for each spare CPU), merged with the others by time."""
    logs = [random_log(tmp_path / f"rank{seed}.log", seed + 40, lines=4000 + 1000 * seed) for seed in range(3)]
    done = python(str(CHECK), "replay", "0", *map(str, logs))
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    here = python(str(CHECK), "replay", "0", *map(str, logs), extra={parse_ahead.OFF_ENV: "0"})
    want = json.loads(here.stdout)
    assert want["forks"] == 0
    assert got["forks"] == min(3, len(os.sched_getaffinity(0)) - 1)
    assert got["alerts"] == want["alerts"] and got["notices"] == want["notices"]
    assert want["alerts"]


def test_an_error_of_the_child_is_raised_here_as_it_was_there(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from dflash_watch.parse_ahead import forked_batches
        from dflash_watch.replay import log_batches
        for read in (forked_batches, log_batches):
            try:
                list(read(sys.argv[1]))
            except Exception as exc:
                print(type(exc).__name__, exc)
        """
    )
    done = python("-c", script, str(tmp_path / "gone.log"))
    assert done.returncode == 0, done.stderr
    forked, here = done.stdout.splitlines()
    assert forked == here
    assert here.startswith("ReplayInputError ") and "gone.log" in here


def test_an_error_that_cannot_travel_comes_as_its_type_and_text() -> None:
    class Local(Exception):  # a class pickle cannot find by name
        pass

    carried = parse_ahead._portable(Local("disk on fire"))
    assert type(carried) is RuntimeError and str(carried) == "Local: disk on fire"
    kept = parse_ahead._portable(OSError(5, "Input/output error"))
    assert type(kept) is OSError


# A forked read of the log named first, its first batch taken.
CHILD_OF = FORKS + textwrap.dedent(
    """
    from dflash_watch.parse_ahead import forked_batches
    from dflash_watch.replay import ReplayInputError
    def reaped():
        try:
            os.waitpid(pids[0], os.WNOHANG)
        except ChildProcessError:
            return "reaped"
        return "not reaped"
    batches = forked_batches(sys.argv[1])
    next(batches)
    """
)


def test_a_child_killed_mid_way_is_one_clear_error(tmp_path: Path) -> None:
    log = tmp_path / "ranks.log"
    write_log(log, 60_000, "ranks", seed=4)
    script = CHILD_OF + textwrap.dedent(
        """
        os.kill(pids[0], signal.SIGKILL)  # our own child
        try:
            n = sum(1 for _ in batches)
        except ReplayInputError as exc:
            print("error", exc)
        else:
            print("no error after", n)
        print(reaped())
        """
    )
    done = python("-c", script, str(log))
    assert done.returncode == 0, done.stderr
    error, reaped = done.stdout.splitlines()
    assert error == f"error {log}: the process parsing it ended early (killed by signal 9)"
    assert reaped == "reaped"


def test_a_reader_that_stops_early_leaves_no_child_and_ctrl_c_is_ours(tmp_path: Path) -> None:
    log = tmp_path / "progress.log"
    write_log(log, 60_000, "progress", seed=4)
    script = CHILD_OF + textwrap.dedent(
        """
        with open(f"/proc/{pids[0]}/status") as status:
            ignored = int(next(line for line in status if line.startswith("SigIgn:")).split()[1], 16)
        print("sigint ignored", bool(ignored & (1 << (signal.SIGINT - 1))))
        batches.close()
        print(reaped())
        """
    )
    done = python("-c", script, str(log))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["sigint ignored True", "reaped"]


def test_the_child_neither_flushes_our_buffers_nor_runs_our_exit_handlers(tmp_path: Path) -> None:
    log = tmp_path / "progress.log"
    write_log(log, 20_000, "progress", seed=6)
    exits = tmp_path / "exits"
    script = textwrap.dedent(
        """
        import atexit, sys
        from dflash_watch import parse_ahead
        from dflash_watch.replay import replay
        atexit.register(lambda: open(sys.argv[2], "a").write("exit\\n"))
        sys.stdout.write("before\\n")  # buffered: stdout is a pipe and PYTHONUNBUFFERED is unset
        parse_ahead.MIN_BYTES = 0
        result = replay([sys.argv[1]], parse_ahead=True)
        sys.stdout.write(f"after {len(result.alerts)}\\n")
        """
    )
    done = python("-c", script, str(log), str(exits))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "before" and lines[1].startswith("after ") and len(lines) == 2, lines
    assert exits.read_text() == "exit\n"


def test_chosen_forks_only_where_it_can_help(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small, mid, large = (tmp_path / f"{name}.log" for name in ("small", "mid", "large"))
    small.write_bytes(b"x\n" * 10)
    mid.write_bytes(b"x\n" * 3000)
    large.write_bytes(b"x\n" * 5000)
    paths = [str(small), str(large), str(mid), str(tmp_path / "missing.log")]
    monkeypatch.delenv(parse_ahead.OFF_ENV, raising=False)
    monkeypatch.setattr(parse_ahead.threading, "active_count", lambda: 1)
    monkeypatch.setattr(parse_ahead.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert parse_ahead.chosen(paths, min_bytes=1000) == {1, 2}
    assert parse_ahead.chosen(paths, min_bytes=8000) == {1}
    monkeypatch.setattr(parse_ahead.os, "sched_getaffinity", lambda pid: {0, 1})
    assert parse_ahead.chosen(paths, min_bytes=1000) == {1}  # the largest first
    monkeypatch.setattr(parse_ahead.os, "sched_getaffinity", lambda pid: {0})
    assert parse_ahead.chosen(paths, min_bytes=0) == set()  # no CPU to spare
    monkeypatch.setattr(parse_ahead.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(parse_ahead, "MIN_BYTES", 9000)
    assert parse_ahead.chosen(paths) == {1}  # the module's floor, read when called
    monkeypatch.setenv(parse_ahead.OFF_ENV, "0")
    assert parse_ahead.chosen(paths, min_bytes=0) == set()
    monkeypatch.delenv(parse_ahead.OFF_ENV)
    monkeypatch.setattr(parse_ahead.threading, "active_count", lambda: 2)
    assert parse_ahead.chosen(paths, min_bytes=0) == set()  # another thread: no fork


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_the_pipe_is_widened_to_hold_a_batch() -> None:
    import fcntl

    r, w = os.pipe()
    try:
        before = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
        parse_ahead._widen(w)
        after = fcntl.fcntl(r, fcntl.F_GETPIPE_SZ)
    finally:
        os.close(r)
        os.close(w)
    if after == before:
        pytest.skip("this user's pipe pages are at their limit")
    assert after == parse_ahead.PIPE_BYTES


def _progress(i: int) -> Progress:
    return Progress(time=100.0 + i, source=f"a.log:{i}", step=i, loss=float("nan") if i == 3 else 2.5,
                    metrics=(("lr", 1e-4),), rate=-0.0 if i == 2 else 20.0, rate_unit="tok/s")


@pytest.mark.parametrize(
    "shape", ["", "p", "c", "pppp", "cpp", "ppc", "pcp", "ccpcc", "pcpcpc", "ccc", "tpct"],
)
def test_a_batch_is_made_again_with_every_event_in_its_place(shape: str) -> None:
    batch: list[object] = []
    for i, kind in enumerate(shape):
        if kind == "p":
            batch.append(_progress(i))
        elif kind == "c":
            batch.append(Crash(time=100.0 + i, source=f"a.log:{i}", detector="crash", kind="cuda_oom", exc_type="OutOfMemoryError",
                               message="x", signature="s", text=("y",)))
        else:
            batch.append(Tick(time=100.0 + i))
    columns, others = parse_ahead._packed(batch)  # type: ignore[arg-type]
    made = parse_ahead._rebuilt(columns, others)
    assert [(type(e), repr(e)) for e in made] == [(type(e), repr(e)) for e in batch]
    assert len(others) == shape.count("c") + shape.count("t")
