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
import signal
import subprocess
import sys
import textwrap
import time
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


# The children this process forks, by pid (ours to signal and to wait for),
# with four CPUs pretended (a one-CPU runner forks too).
FORKS = textwrap.dedent(
    """
    import os, sys, signal
    from tests.shell.parse_ahead_check import forks_counted, reaped
    pids = forks_counted()
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
    assert ahead.stderr.endswith("forks=1\n"), ahead.stderr
    assert here.stderr.endswith("forks=0\n"), here.stderr
    assert ahead.stderr.removesuffix("forks=1\n") == here.stderr.removesuffix("forks=0\n")


def test_baseline_save_diff_and_check_fork_and_say_the_same(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.log", tmp_path / "bad.log"
    write_log(good, 45_000, "progress", seed=2)
    write_log(bad, 45_000, "degraded", seed=2)
    outs = []
    for extra, forks in (({}, 1), ({parse_ahead.OFF_ENV: "0"}, 0)):
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
    assert got["forks"] == 3  # four CPUs pretended: a child for each
    assert got["alerts"] == want["alerts"] and got["notices"] == want["notices"]
    assert want["alerts"]


def test_an_error_of_the_child_is_raised_here_as_it_was_there(tmp_path: Path) -> None:
    script = FORKS + textwrap.dedent(
        """
        from dflash_watch.parse_ahead import forked_batches
        from dflash_watch.replay import log_batches
        kept = []
        for read in (forked_batches, log_batches):
            try:
                list(read(sys.argv[1]))
            except Exception as exc:
                kept.append(exc)  # its traceback holds the reader's frame: the child is ended all the same
                print(type(exc).__name__, exc)
                notes = getattr(exc, "__notes__", [])
                print("child's traceback:", any("parsing ahead" in n and "log_batches" in n for n in notes))
        print(reaped(pids[0]))
        """
    )
    done = python("-c", script, str(tmp_path / "gone.log"))
    assert done.returncode == 0, done.stderr
    forked, forked_note, here, here_note, reaped = done.stdout.splitlines()
    assert reaped == "reaped"
    assert forked == here
    assert here.startswith("ReplayInputError ") and "gone.log" in here
    # The child's frames ride along as a note (str(exc), the one line a command prints, is unchanged).
    assert (forked_note, here_note) == ("child's traceback: True", "child's traceback: False")


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
        print(reaped(pids[0]))
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
        print(reaped(pids[0]))
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
    monkeypatch.setattr(parse_ahead, "CPU_MAX", os.devnull)  # no quota: the affinity counts
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
    for off in ("0", "false", " OFF ", "no"):
        monkeypatch.setenv(parse_ahead.OFF_ENV, off)
        assert parse_ahead.chosen(paths, min_bytes=0) == set(), off
    monkeypatch.setenv(parse_ahead.OFF_ENV, "1")
    assert parse_ahead.chosen(paths, min_bytes=0) == {0, 1, 2}
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


@pytest.mark.parametrize(
    ("quota", "cpus"),
    [("max 100000", 8), ("150000 100000", 1), ("400000 100000", 4), ("1600000 100000", 8), ("5000 100000", 1),
     ("garbage", 8), ("", 8)],
)
def test_a_cgroup_quota_counts_as_fewer_cpus(quota: str, cpus: int, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A container given 1.5 CPUs of a large box has one to run on, not the box's."""
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text(quota + "\n")
    monkeypatch.setattr(parse_ahead, "CPU_MAX", str(cpu_max))
    monkeypatch.setattr(parse_ahead.os, "sched_getaffinity", lambda pid: set(range(8)))
    assert parse_ahead.usable_cpus() == cpus


def test_one_object_twice_in_a_batch_stays_one_object() -> None:
    step = _progress(1)
    batch = [_progress(0), step, Tick(time=101.5), step]
    columns, others = parse_ahead._packed(batch)  # type: ignore[arg-type]
    made = parse_ahead._rebuilt(columns, others)
    assert made[1] is made[3] and made[0] is not made[1]
    assert [(type(e), repr(e)) for e in made] == [(type(e), repr(e)) for e in batch]


def test_no_descriptor_for_the_pipe_reads_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = random_log(tmp_path / "r.log", 3, lines=2000)

    def no_pipe() -> tuple[int, int]:
        raise OSError(24, "Too many open files")

    def no_fork() -> int:
        raise AssertionError("forked without a pipe")

    monkeypatch.setattr(parse_ahead.os, "pipe", no_pipe)
    monkeypatch.setattr(parse_ahead.os, "fork", no_fork)
    n1: list[str] = []
    n2: list[str] = []
    got = list(parse_ahead.forked_batches(str(log), notices=n1))
    want = list(parse_ahead.log_batches(str(log), notices=n2))
    assert [[repr(e) for e in b] for b in got] == [[repr(e) for e in b] for b in want] and n1 == n2
    assert got


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_dies_with_its_parent_even_with_nothing_to_send(tmp_path: Path) -> None:
    """A child that has nothing to write (here: blocked opening a FIFO no
    one writes, as a long stretch of lines without an event keeps it from
    writing) would learn of its parent's death only at its next write."""
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    script = FORKS + textwrap.dedent(
        """
        from dflash_watch.parse_ahead import forked_batches
        counted = os.fork
        def told():
            pid = counted()
            if pid:
                print(pid, flush=True)  # (the parent, at once: the child then blocks opening the FIFO)
            return pid
        os.fork = told
        next(forked_batches(sys.argv[1]))
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(fifo)], env=env(), cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.3)
        assert _alive(child)  # blocked in the FIFO's open, as the parent is in its read
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child), "the child outlived its parent"
    finally:
        parent.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)  # our own (a child of the process this test started)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_later_child_holds_no_earlier_childs_pipe(tmp_path: Path) -> None:
    """Several logs: each child holds its own pipe's write end only, so an
    earlier child finds its reader gone however long a later one runs."""
    logs = []
    for seed in range(3):
        log = tmp_path / f"progress{seed}.log"
        write_log(log, 150_000, "progress", seed=seed)  # more than a pipe holds: each child waits on its pipe
        logs.append(str(log))
    script = FORKS + textwrap.dedent(
        """
        from dflash_watch.parse_ahead import forked_batches
        def pipes(pid):
            out = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("pipe:"):
                    out.add(target)
            return out
        before = pipes(os.getpid())
        readers = [forked_batches(path) for path in sys.argv[1:]]
        for reader in readers:
            next(reader)
        ours = pipes(os.getpid()) - before  # the read ends of the three children's pipes
        print(len(ours), [len(pipes(pid) & ours) for pid in pids])
        for reader in readers:
            reader.close()
        """
    )
    done = python("-c", script, *logs)
    assert done.returncode == 0, done.stderr
    # Each child: its own pipe's write end (one of ``ours``), no other child's read end.
    assert done.stdout.split() == ["3", "[1,", "1,", "1]"], done.stdout


def test_a_ctrl_c_that_reaches_the_child_before_it_ignores_it_is_dropped(tmp_path: Path) -> None:
    """Right after the fork, before the child ignores SIGINT: held back, then
    dropped. Without that, KeyboardInterrupt would raise in the caller's
    code, in the child, and the child would go on as a second parent."""
    log = tmp_path / "progress.log"
    write_log(log, 20_000, "progress", seed=7)
    script = FORKS + textwrap.dedent(
        """
        counted = os.fork
        def fork():
            pid = counted()
            if pid == 0:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, landing in the child at once
            return pid
        os.fork = fork
        from dflash_watch import parse_ahead
        from dflash_watch.replay import replay
        parse_ahead.MIN_BYTES = 0
        try:
            result = replay([sys.argv[1]], parse_ahead=True)
            print("alerts", len(result.alerts), os.getpid(), flush=True)
        except KeyboardInterrupt:
            print("interrupted", os.getpid(), flush=True)
        """
    )
    done = python("-c", script, str(log))
    here = python("-c", script, str(log), extra={parse_ahead.OFF_ENV: "0"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")[:-1]
    assert len(lines) == 1 and lines[0].startswith("alerts "), done.stdout  # one process answered, and it finished
    assert lines[0].split()[1] == here.stdout.split()[1]


def test_ctrl_c_while_reading_interrupts_at_once_and_the_child_goes(tmp_path: Path) -> None:
    """SIGINT is held back only across the fork: while batches are read, a
    Ctrl-C interrupts there and then, and the child is killed and reaped."""
    log = tmp_path / "progress.log"
    write_log(log, 150_000, "progress", seed=8)
    script = CHILD_OF + textwrap.dedent(
        """
        try:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, with the child reading on
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted")
        batches.close()
        print(reaped(pids[0]))
        """
    )
    done = python("-c", script, str(log))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["interrupted", "reaped"]


def test_every_child_starts_at_once_and_one_never_read_is_ended(tmp_path: Path) -> None:
    """A merge asks each log for its first batch in turn; a child that waits
    long for its first event (here: blocked opening a FIFO no one writes)
    must not hold back the start of the others. A reader dropped unread
    ends its child when it is collected."""
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    logs = [str(fifo)]
    for seed in range(2):
        log = tmp_path / f"progress{seed}.log"
        write_log(log, 20_000, "progress", seed=seed)
        logs.append(str(log))
    script = FORKS + textwrap.dedent(
        """
        import gc
        from dflash_watch.parse_ahead import forked_batches
        readers = [forked_batches(path) for path in sys.argv[1:]]
        print("forked before any read:", len(pids))
        print("batches of the others:", [sum(map(len, reader)) > 0 for reader in readers[1:]])
        blocked = pids[0]
        del readers
        gc.collect()
        print(reaped(blocked))
        """
    )
    done = python("-c", script, *logs, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["forked before any read: 3", "batches of the others: [True, True]", "reaped"]


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (a process this test started), from its own
    /proc entry: no other process on the machine is looked at."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                found += [int(c) for c in children.read().split()]
    except OSError:
        pass
    return found


def _alive_in(pid: int, pgid: int) -> bool:
    """Whether ``pid`` (a child this test saw its command fork) still runs in
    group ``pgid``: not gone, not a zombie, not a reused number elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return int(fields[2]) == pgid and fields[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_ctrl_c_in_a_terminal_ends_the_command_and_its_child(tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to the whole foreground group, the replay and
    its child alike: the command stops as it does without a child (exit 130,
    no traceback) and nothing of it is left running."""
    log = tmp_path / "progress.log"
    write_log(log, 600_000, "progress", seed=9)
    command = [sys.executable, "-c", COUNTED, "replay", "--json", str(log)]
    proc = subprocess.Popen(command, env=env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # its own group, as a terminal's job
    try:
        deadline = time.monotonic() + 30
        while not (children := _children(proc.pid)) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(children) == 1, "no child parsing ahead was seen"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "Traceback" not in err, err
        deadline = time.monotonic() + 5
        while _alive_in(children[0], proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive_in(children[0], proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
