"""Bad input as users and broken writers hand it over: one line and exit 2,
or the line skipped with a notice; never a traceback, a hang, or an alert
lost from the good lines around it (issue 17, "Bad input").

Every test runs the real CLI as a subprocess, with HOME and the state dir
inside the test's folder so that no config of the machine leaks in.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
DEEP_ARRAY = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000
DIGITS_400 = "1" * 400
# A line per way to break a JSON reader: nesting past the parser's recursion
# (RecursionError) and numbers no counter or float holds (OverflowError later).
BAD_SAMPLE_LINES = [
    DEEP_ARRAY,
    DEEP_OBJECT,
    f'{{"time": {DIGITS_400}, "gpu": 0, "used_bytes": 1, "total_bytes": 2}}',
    f'{{"time": 1764410401.0, "gpu": {DIGITS_400}, "used_bytes": 1, "total_bytes": 2}}',
    f'{{"time": 1764410401.0, "gpu": 0, "used_bytes": 1{"0" * 400}, "total_bytes": 100}}',
    '{"time": 1e400, "gpu": 0, "used_bytes": 1, "total_bytes": 2}',
]
BAD_PROBE_LINES = [
    DEEP_ARRAY,
    DEEP_OBJECT,
    f'{{"time": {DIGITS_400}, "rank": 0, "step": 3}}',
    f'{{"time": 1764410401.0, "rank": 0, "step": {DIGITS_400}}}',
    f'{{"time": 1764410401.0, "rank": 0, "tokens": 1{"0" * 400}}}',
]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONPATH": path}
    env.pop("PYTHONUNBUFFERED", None)  # users do not set it
    env.update(extra)
    return env


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "dflash_watch.cli", *args]


def cli(tmp_path: Path, *args: str, timeout: float = 60, prefix: tuple[str, ...] = (),
        **env: str) -> subprocess.CompletedProcess[str]:
    """The command in ``tmp_path``; a hang fails the test (no input may make it wait)."""
    try:
        return subprocess.run([*prefix, *_argv(*args)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=timeout, env=_env(tmp_path, **env), check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"dflash-watch {' '.join(args)[:80]} hung for {timeout} s")


def one_line(out: subprocess.CompletedProcess[str], code: int = 2) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == code and len(lines) == 1 and "Traceback" not in out.stderr, (out.returncode, out.stderr)
    return lines[0]


def a_log(tmp_path: Path, steps: int = 60, t0: float | None = None, name: str = "train.log") -> Path:
    """One step every 5 s at 21.5 Ktok/s, local naive stamps, from ``t0``."""
    t0 = datetime(2026, 11, 29, 10).timestamp() if t0 is None else t0
    stamp = lambda t: datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")
    log = tmp_path / name
    log.write_text("".join(f"{stamp(t0 + 5 * i)} step {i + 1}/5000 | loss 2.0 | 21.5 Ktok/s\n" for i in range(steps)))
    return log


def sample(t: float, used_gib: float, total_gib: float = 80.0, gpu: int = 0) -> str:
    return json.dumps({"time": t, "gpu": gpu, "used_bytes": int(used_gib * GIB), "total_bytes": int(total_gib * GIB)})


def full_gpu_lines(t0: float, seconds: int) -> list[str]:
    """GPU 0 at 79.5 of 80 GiB for ``seconds``: memory_pressure, with a bad line after every good one."""
    out = []
    for s in range(seconds):
        out.append(sample(t0 + s, 79.5))
        out.append(BAD_SAMPLE_LINES[s % len(BAD_SAMPLE_LINES)])
    return out


# -- 1. GPU-sample, probe and baseline lines ------------------------------------------


def test_bad_sample_lines_are_skipped_with_a_notice_and_the_good_ones_still_fire(tmp_path: Path) -> None:
    log = a_log(tmp_path)
    t0 = datetime(2026, 11, 29, 10).timestamp()
    samples = tmp_path / "gpu.jsonl"
    samples.write_text("\n".join(full_gpu_lines(t0 + 60, 40)) + "\n")
    out = cli(tmp_path, "replay", "--json", str(log), "--gpu-samples", str(samples))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "40 of 80 lines are not GPU samples and were skipped" in out.stderr
    fired = [json.loads(line) for line in out.stdout.splitlines()]
    assert ("memory_pressure", "firing") in [(a["detector"], a["state"]) for a in fired]


def test_bad_probe_lines_are_skipped_with_a_notice(tmp_path: Path) -> None:
    log = a_log(tmp_path)
    probe = tmp_path / "dflash-probe-rank0.jsonl"
    good = [json.dumps({"time": datetime(2026, 11, 29, 10).timestamp() + i, "rank": 0, "step": i}) for i in range(3)]
    probe.write_text("\n".join([good[0], *BAD_PROBE_LINES, *good[1:]]) + "\n")
    out = cli(tmp_path, "replay", "--json", str(log), "--probe", str(probe))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert f"{len(BAD_PROBE_LINES)} of {len(BAD_PROBE_LINES) + 3} lines are not probe lines" in out.stderr


@pytest.mark.parametrize("value", [DEEP_ARRAY, DEEP_OBJECT, DIGITS_400, "1e400"],
                         ids=["deep-array", "deep-object", "400-digits", "1e400"])
@pytest.mark.parametrize("field", ["throughput_tokens_per_s", "gpu_memory"])
def test_a_baseline_too_deep_or_too_large_is_one_line(tmp_path: Path, field: str, value: str) -> None:
    log = a_log(tmp_path, steps=3)
    baseline = tmp_path / "b.json"
    body = {"version": 1, "throughput_tokens_per_s": 21500.0, "gpu_memory": {}}
    text = json.dumps(body).replace('{}' if field == "gpu_memory" else "21500.0", value)
    baseline.write_text(text)
    line = one_line(cli(tmp_path, "replay", "--json", "--baseline", str(baseline), str(log)))
    assert "b.json" in line and "invalid JSON" in line


def test_live_headless_fires_memory_pressure_from_the_good_lines_around_bad_ones(tmp_path: Path) -> None:
    """Live, a bad line used to end the sampler thread, which re-read the file
    from its start after 5 s and died on the same line, forever: the GPU at
    99% never became an alert. Now the bad lines are skipped (said once)."""
    now = time.time()
    samples = tmp_path / "gpu.jsonl"
    samples.write_text("\n".join(full_gpu_lines(now - 30, 30)) + "\n")
    proc = subprocess.Popen(_argv("headless", "--gpu-samples", str(samples)), cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    fired = None
    try:
        deadline = time.monotonic() + 15
        with open(samples, "a", encoding="utf-8") as fh:
            while fired is None and time.monotonic() < deadline:
                fh.write(sample(time.time(), 79.5) + "\n" + DEEP_ARRAY + "\n")
                fh.flush()
                ready, _, _ = select.select([proc.stdout], [], [], 1.0)
                if ready:
                    alert = json.loads(proc.stdout.readline())
                    if (alert["detector"], alert["state"]) == ("memory_pressure", "firing"):
                        fired = alert
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert fired is not None and fired["gpu"] == 0, err
    assert "skipping lines that are not GPU samples" in err
    assert "Traceback" not in err and "failed" not in err, err


# -- 2. replay and check on what is not a log -----------------------------------------


@pytest.mark.parametrize("command", ["replay", "check"])
@pytest.mark.parametrize("target", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path, command: str, target: str) -> None:
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)  # nobody writes: opening it would wait forever
    args = ["replay", "--json", target] if command == "replay" else ["check", "--log", target]
    line = one_line(cli(tmp_path, *args, timeout=20))
    assert "not a regular file" in line and target in line


@pytest.mark.parametrize("command", ["headless", "watch"])
@pytest.mark.parametrize("target", ["fifo", "folder", "/dev/null"])
def test_the_live_commands_refuse_a_log_that_is_no_regular_file_at_once(
    tmp_path: Path, command: str, target: str
) -> None:
    """The tailer follows regular files only: given only a FIFO, a folder or
    a device, headless said so once and ran on watching nothing."""
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    elif target == "folder":
        target = str(tmp_path / "logs")
        os.mkdir(target)
    line = one_line(cli(tmp_path, command, "--no-gpu", "--log", target, timeout=20))
    assert line.startswith(f"dflash-watch: {target}: ") and ("not a regular file" in line or "a directory" in line), line


@pytest.mark.parametrize("flag", ["--config", "--baseline"])
def test_a_config_or_baseline_that_is_a_device_is_refused_at_once(tmp_path: Path, flag: str) -> None:
    line = one_line(cli(tmp_path, "replay", "--json", str(a_log(tmp_path, steps=3)), flag, "/dev/zero", timeout=20))
    assert "/dev/zero: not a regular file" in line


def test_check_refuses_random_bytes_but_reads_a_log_with_a_hole_and_latin_1(tmp_path: Path) -> None:
    noise = tmp_path / "noise.log"
    noise.write_bytes(os.urandom(64 * 1024))
    line = one_line(cli(tmp_path, "check", "--log", str(noise)))
    assert "not a text log" in line
    # copytruncate under a writer without O_APPEND: a hole of NULs, then text;
    # a Latin-1 name in it is a stray byte, not a binary.
    log = a_log(tmp_path, steps=3, t0=time.time() - 10)
    log.write_bytes(b"\0" * 100_000 + log.read_bytes().replace(b"loss", b"M\xfcller loss"))
    out = cli(tmp_path, "check", "--log", str(log))
    assert out.returncode == 0 and "healthy" in out.stdout, out.stderr


@pytest.mark.parametrize("args", [("replay", "--json"), ("replay", "--report"), ("replay", "--json", "GOOD", "--gpu-samples")])
def test_replay_refuses_random_bytes_or_a_binary_with_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    """As ``check`` does: read as a log, a binary gives no line and no
    alert, and replay printed nothing (or a report of nothing) with exit 0."""
    import gzip

    noise = tmp_path / "noise.bin"
    noise.write_bytes(os.urandom(64 * 1024))
    # A compressed log, and a small program: mostly printable once its NULs
    # are set aside (its symbol names), told by its first bytes.
    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress(a_log(tmp_path, steps=300).read_bytes()))
    program = tmp_path / "launcher"
    program.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 4000 + b"libpython3.so\0Py_BytesMain\0" * 100)
    for bad, why in ((noise, "is neither UTF-8 nor printable"), (packed, "a gzip file: decompress it first"),
                     (program, "a program (ELF)")):
        argv = [a.replace("GOOD", str(a_log(tmp_path, steps=3))) for a in args]
        line = one_line(cli(tmp_path, *argv, str(bad)))
        assert f"{bad}: not a text log" in line and why in line, line


def test_check_on_a_log_silent_for_days_says_how_long(tmp_path: Path) -> None:
    last = time.time() - 2.5 * 86400
    log = a_log(tmp_path, steps=60, t0=last - 59 * 5)
    os.utime(log, (last, last))
    out = cli(tmp_path, "check", "--json", "--log", str(log))
    assert out.returncode == 1, out.stderr
    (stall,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert stall["detector"] == "stall" and "no progress for 2.5 days" in stall["message"]
    assert abs(stall["evidence"]["silence_s"] - 2.5 * 86400) < 120
    text = cli(tmp_path, "check", "--log", str(log))
    assert "no progress for 2.5 days" in text.stdout


@pytest.mark.parametrize("offset_h", [-3, 3])
def test_check_judges_silence_by_when_the_log_was_written_not_by_its_stamps(tmp_path: Path, offset_h: int) -> None:
    """A log stamped hours off this machine's clock (another zone, a wrong
    clock): its silence is how long ago it was last written. Stamps 3 h
    behind but written a second ago were "no progress for 3 h"; stamps
    3 h ahead and silent for 10 min were "healthy"."""
    wall = time.time()
    log = a_log(tmp_path, steps=60, t0=wall + offset_h * 3600 - 59 * 5)
    fresh = cli(tmp_path, "check", "--log", str(log))
    assert fresh.returncode == 0 and "healthy" in fresh.stdout, (fresh.stdout, fresh.stderr)
    os.utime(log, (wall - 600, wall - 600))
    silent = cli(tmp_path, "check", "--json", "--log", str(log))
    assert silent.returncode == 1, (silent.stdout, silent.stderr)
    (stall,) = [json.loads(line) for line in silent.stdout.splitlines()]
    assert stall["detector"] == "stall" and "no progress for 10 min" in stall["message"], stall["message"]


# -- 3. headless, config, state dir, sinks -------------------------------------------


def test_headless_with_nothing_to_watch_is_exit_2(tmp_path: Path) -> None:
    line = one_line(cli(tmp_path, "headless", "--no-gpu", timeout=20))
    assert "nothing to watch" in line and "--log" in line


@pytest.mark.parametrize("command", ["replay", "headless", "check"])
def test_a_toml_nested_2000_deep_is_one_line(tmp_path: Path, command: str) -> None:
    config = tmp_path / "deep.toml"
    config.write_text("a = " + "[" * 2000 + "]" * 2000 + "\n")
    log = a_log(tmp_path, steps=3)
    args = ["replay", "--json", str(log)] if command == "replay" else [command, "--log", str(log)]
    line = one_line(cli(tmp_path, *args, "--config", str(config), timeout=20))
    assert "deep.toml" in line and "nested too deep" in line


def _read_only(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    """A state dir that cannot be written: a read-only mount for root (who
    writes through any mode bits), in a private mount namespace that ends
    with the command; else mode 0o500."""
    state = tmp_path / "ro-state"
    state.mkdir()
    if os.geteuid() != 0:
        state.chmod(0o500)
        return state, ()
    if not shutil.which("unshare"):
        pytest.skip("root without unshare: no way to make a read-only dir")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("no private mount namespace here (unshare -m)")
    return state, ("unshare", "-m", "sh", "-c", f'mount -t tmpfs -o ro tmpfs "{state}" && exec "$@"', "sh")


@pytest.mark.parametrize("kind", ["file", "read-only"])
@pytest.mark.parametrize("command", ["start", "status", "abort", "relaunch", "watch", "headless"])
def test_a_state_dir_that_cannot_be_written_is_one_line(tmp_path: Path, command: str, kind: str) -> None:
    prefix: tuple[str, ...] = ()
    if kind == "file":
        state = tmp_path / "state-file"
        state.write_text("not a directory\n")
    else:
        state, prefix = _read_only(tmp_path)
    socket = f"bad-input-{os.getpid()}"
    args = [command, "--session", "train", "--socket", socket]
    if command in ("start", "relaunch"):
        args += ["--cmd", "sleep 60"]
    if command in ("watch", "headless"):
        args += ["--log", str(a_log(tmp_path, steps=3)), "--no-gpu"]
    try:
        line = one_line(cli(tmp_path, *args, timeout=20, prefix=prefix, XDG_STATE_HOME=str(state)))
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, check=False)
    assert "state dir" in line and str(state) in line and "XDG_STATE_HOME" in line


def test_a_state_dir_in_the_config_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("")
    config = tmp_path / "c.toml"
    config.write_text(f'[run]\nstate_dir = "{tmp_path / "blocker" / "state"}"\n')
    line = one_line(cli(tmp_path, "status", "--config", str(config), "--session", "train",
                        "--socket", f"bad-input-{os.getpid()}"))
    assert "[run] state_dir" in line and "blocker is not a directory" in line


@pytest.mark.parametrize("command", ["replay", "headless"])
def test_a_webhook_url_with_a_password_is_refused_without_printing_it(tmp_path: Path, command: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[[alerts.sink]]\nkind = "webhook"\nname = "oncall"\n'
                      'url = "https://bob:s3cr3t-pw@hooks.example.com/alert"\n')
    log = a_log(tmp_path, steps=3)
    args = ["replay", "--json", str(log)] if command == "replay" else ["headless", "--no-gpu", "--log", str(log)]
    out = cli(tmp_path, *args, "--config", str(config), timeout=20)
    line = one_line(out)
    assert "oncall" in line and "credentials" in line and "url_env" in line
    assert "s3cr3t" not in out.stderr + out.stdout and "bob" not in line


# -- 4. baseline save over a bad window -------------------------------------------------


def _crashed_run(tmp_path: Path) -> Path:
    t0 = datetime(2026, 11, 29, 10).timestamp()
    stamp = lambda t: datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")
    lines = [f"{stamp(t0 + 5 * i)} step {i + 1}/5000 | 21.5 Ktok/s" for i in range(120)]
    lines[60:60] = [f"{stamp(t0 + 300)} Traceback (most recent call last):", '  File "train.py", line 10, in <module>',
                    "    main()", "RuntimeError: CUDA error: an illegal memory access was encountered"]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_baseline_save_refuses_a_window_with_a_crash_unless_forced(tmp_path: Path) -> None:
    log = _crashed_run(tmp_path)
    window = ["--from", "2026-11-29T10:02:00", "--to", "2026-11-29T10:09:00"]
    out = cli(tmp_path, "baseline", "save", str(log), *window, "--out", "b.json")
    line = one_line(out, code=1)
    assert "not saved" in line and "crash/cuda_error" in line and "--force" in line
    assert not (tmp_path / "b.json").exists()
    forced = cli(tmp_path, "baseline", "save", str(log), *window, "--out", "b.json", "--force")
    assert forced.returncode == 0 and "Traceback" not in forced.stderr, forced.stderr
    assert "warning: saved with --force" in forced.stderr and "crash/cuda_error" in forced.stderr
    assert json.loads((tmp_path / "b.json").read_text())["throughput_tokens_per_s"] == pytest.approx(21500)
    # The default window (the whole run after warm-up) is saved, with a warning.
    whole = cli(tmp_path, "baseline", "save", str(log), "--out", "whole.json")
    assert whole.returncode == 0 and "warning:" in whole.stderr and "--from/--to" in whole.stderr, whole.stderr
    # A window of the same run before the crash is healthy: saved, no warning.
    clean = cli(tmp_path, "baseline", "save", str(log), "--from", "2026-11-29T10:01:00", "--to",
                "2026-11-29T10:04:00", "--out", "early.json")
    assert clean.returncode == 0 and clean.stderr == "", clean.stderr


# -- 5. the probe's "waiting for" notice ------------------------------------------------


def _headless_stderr(tmp_path: Path, *args: str) -> str:
    proc = subprocess.Popen(_argv("headless", "--no-gpu", *args), cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "Traceback" not in err, err
    return err


def test_the_probe_is_waited_for_aloud_only_when_asked_for(tmp_path: Path) -> None:
    log = a_log(tmp_path, steps=3)
    assert "dflash-probe" not in _headless_stderr(tmp_path, "--log", str(log))
    err = _headless_stderr(tmp_path, "--log", str(log), "--probe", str(tmp_path / "probes" / "rank*.jsonl"))
    assert err.count("rank*.jsonl") == 1, err
