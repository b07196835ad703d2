"""Progress bars redrawn with '\\r' and no newline (issue 17), with real writers.

HF Trainer and Lightning's TQDMProgressBar draw one tqdm bar per epoch (HF:
per run) and end it with a newline only when it closes. Live, every state
drawn since the last look is read, each at its own time, so the detectors
judge the bar as it is drawn; in replay every state of a bar of many MiB
is read (the 1 MiB cut is for text without '\\r').
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from headless_helpers import alert_lines

from dflash_watch.monitor import Monitor
from dflash_watch.sources.logtail import Chunk, LogTailer

needs_tqdm = pytest.mark.skipif(
    importlib.util.find_spec("tqdm") is None, reason="the bars are drawn by real tqdm"
)

BASELINE = '{"version": 1, "throughput_tokens_per_s": 2000}\n'

# A real tqdm bar of tokens to a file (``file=fh``, as a training script
# passes its log), 2000 tok/s for ``fast`` seconds then 400 tok/s; it never
# closes, so the log never gets a newline. The wall time of the drop goes
# to stderr.
LIVE_WRITER = textwrap.dedent(r"""
    import sys, time
    from tqdm import tqdm

    path, fast, total = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    fh = open(path, "w")
    bar = tqdm(file=fh, unit="tok", unit_scale=True, mininterval=0.05, smoothing=0.3, ascii=True)
    t0 = time.monotonic()
    dropped = False
    while (el := time.monotonic() - t0) < total:
        slow = el >= fast
        if slow and not dropped:
            dropped = True
            print(time.time(), file=sys.stderr, flush=True)
        time.sleep(0.05)
        bar.update(20 if slow else 100)
        bar.set_postfix(loss=2.31, refresh=False)
    time.sleep(3600)  # hold the bar open: no close, no newline
""")

# A real tqdm bar on a fake clock (tqdm reads time through ``tqdm.std.time``):
# exact rates, and megabytes of redraws in a few seconds. 2000 tok/s until
# the file passes ``drop`` bytes, 400 tok/s after, one '\r' line of ``size``.
BIG_WRITER = textwrap.dedent(r"""
    import sys
    import tqdm.std

    path, drop, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    now = [1_000_000.0]
    tqdm.std.time = lambda: now[0]
    with open(path, "w") as fh:
        bar = tqdm.std.tqdm(
            file=fh, unit="tok", unit_scale=True, mininterval=0, miniters=1, ascii=True, smoothing=0.3
        )
        while fh.tell() < size:
            now[0] += 0.01 if fh.tell() < drop else 0.05
            bar.update(20)
            bar.set_postfix(loss=2.31, refresh=False)
        print(now[0] - bar.start_t, file=sys.stderr)
        bar.close()
""")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # users run without it
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dflash_watch.cli", *args]


# -- the tailer and the Monitor: every state since the last look -------------


def test_the_tailer_hands_on_every_state_drawn_since_the_last_poll(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    with LogTailer([str(log)], use_watchdog=False) as tailer, open(log, "ab") as fh:
        fh.write(b"".join(f"\r{i}.00ktok [00:0{i}, 2.00ktok/s]".encode() for i in range(1, 4)))
        fh.flush()
        (chunk,) = [c for c in tailer.poll() if isinstance(c, Chunk)]
        assert chunk.partial and chunk.text.split("\r") == [
            "1.00ktok [00:01, 2.00ktok/s]", "2.00ktok [00:02, 2.00ktok/s]", "3.00ktok [00:03, 2.00ktok/s]\n"
        ]
        fh.write(b"\r3.40ktok [00:04, 400tok/s]\r3.80ktok [00:05, 400tok/s]")
        fh.flush()
        (chunk,) = [c for c in tailer.poll() if isinstance(c, Chunk)]
        assert chunk.text == "3.40ktok [00:04, 400tok/s]\r3.80ktok [00:05, 400tok/s]\n"  # only the new ones


def _spy(monitor: Monitor) -> list:
    seen: list = []
    feed = monitor.feed_events

    def spy(events):
        events = list(events)
        seen.extend(events)
        return feed(events)

    monitor.feed_events = spy  # type: ignore[method-assign]
    return seen


def test_each_redraw_state_is_a_reading_at_its_own_time(tmp_path: Path) -> None:
    """Three states in one look: three rates, dated by the bar's elapsed
    counter back from the look; without a counter, spread since the last look."""
    monitor = Monitor()
    seen = _spy(monitor)
    path = str(tmp_path / "train.log")
    monitor.feed_partial(path, "1.0ktok [00:08, 2.00ktok/s]\n", 1, 100.0)
    shown = [(2, 9, 2000), (3, 10, 2000), (4, 11, 400)]
    states = "\r".join(f"{k}ktok [00:{s:02d}, {r}tok/s]" for k, s, r in shown)
    monitor.feed_partial(path, states + "\n", 1, 103.0)
    assert [(p.time, p.rate) for p in seen] == [(100.0, 2e3), (101.0, 2e3), (102.0, 2e3), (103.0, 400.0)]
    assert all(p.clocked for p in seen)

    seen.clear()
    other = str(tmp_path / "other.log")  # a bar of a user's pattern-free format without a counter
    monitor.feed_partial(other, "step 1 | 2.0 Ktok/s\n", 1, 200.0)
    monitor.feed_partial(other, "step 2 | 2.0 Ktok/s\rstep 3 | 0.4 Ktok/s\n", 1, 201.0)
    assert [(p.step, p.time) for p in seen] == [(1, 200.0), (2, 200.5), (3, 201.0)]


def test_the_complete_line_repeats_none_of_the_states_read_live(tmp_path: Path) -> None:
    """When the bar closes, its line holds every state again: those read as
    redraws are not progress twice; those drawn after the last look are."""
    monitor = Monitor()
    seen = _spy(monitor)
    path = str(tmp_path / "train.log")
    monitor.feed_partial(path, "1.0ktok [00:01, 2.00ktok/s]\r2.0ktok [00:02, 2.00ktok/s]\n", 1, 100.0)
    seen.clear()
    line = "".join(f"\r{k}.0ktok [00:0{k}, 2.00ktok/s]" for k in range(1, 5)) + "\n"
    monitor.feed_text(path, line, 1, 102.0)
    assert [p.elapsed_s for p in seen if type(p).__name__ == "Progress"] == [3.0, 4.0]


# -- live, end to end: a real tqdm writer, a real headless --------------------


@needs_tqdm
@pytest.mark.slow
def test_a_bar_without_newline_falling_to_a_fifth_fires_throughput_drop_live(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("")
    baseline = tmp_path / "baseline.json"
    baseline.write_text(BASELINE)
    config = tmp_path / "watch.toml"
    # The default budget (warm-up 60 s, smoothing 20 s, 90 s below) in seconds.
    config.write_text(
        "[detectors]\nthroughput_warmup_s = 1\nthroughput_smooth_s = 3\nthroughput_sustain_s = 5\n"
    )
    writer_py = tmp_path / "writer.py"
    writer_py.write_text(LIVE_WRITER)
    watch = subprocess.Popen(
        _cli("headless", "--log", str(log), "--no-gpu", "--baseline", str(baseline), "--config", str(config)),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=_env(),
    )
    writer = subprocess.Popen(
        [sys.executable, str(writer_py), str(log), "4", "30"], stderr=subprocess.PIPE, text=True, env=_env()
    )
    try:
        got = alert_lines(watch, 25.0, lambda a: a["detector"] == "throughput_drop" and a["state"] == "firing")
        alert = got[-1] if got and got[-1]["detector"] == "throughput_drop" and got[-1]["state"] == "firing" else None
        at = alert["_seen"] if alert is not None else time.time()
        assert alert is not None, "no throughput_drop while the bar fell from 2000 to 400 tok/s"
        assert writer.stderr is not None
        dropped = float(writer.stderr.readline())
        latency = at - dropped
        # Smoothing (3 s, crossed about half way) and 5 s below: ~6.5 s.
        assert 4.0 < latency < 12.0, f"drop to alert: {latency:.1f} s"
        assert alert["evidence"]["tokens_per_s"] < 600 and alert["source"] == "train.log:1"
        assert b"\n" not in log.read_bytes()  # it was judged before any newline
    finally:
        writer.kill()
        writer.wait()
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=15)
    assert watch.returncode == 0, err
    print(f"drop to alert: {latency:.1f} s")


# -- replay: a bar of 3 MiB ------------------------------------------------------


@needs_tqdm
def test_replay_reads_every_state_of_a_bar_over_a_mebibyte(tmp_path: Path) -> None:
    """A real 3 MiB tqdm line whose rate falls after 2 MiB: the drop is found
    (cut at 1 MiB, it was lost), and nothing is said about a cut line."""
    log = tmp_path / "train.log"
    gen = tmp_path / "gen.py"
    gen.write_text(BIG_WRITER)
    made = subprocess.run(
        [sys.executable, str(gen), str(log), str(2 << 20), str(3 << 20)],
        capture_output=True, text=True, env=_env(), timeout=60, check=False,
    )
    assert made.returncode == 0, made.stderr
    raw = log.read_bytes()
    assert raw.count(b"\n") == 1 and raw.count(b"\r") > 50_000 and len(raw) > 3 << 20
    # Where the drop is on the bar's own counter: the state at 2 MiB.
    at_drop = raw[2 << 20 :].split(b"\r")[1].decode()
    minutes, seconds = at_drop.split("[")[1].split(",")[0].split(":")
    drop_s = int(minutes) * 60 + int(seconds)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(BASELINE)
    out = subprocess.run(
        _cli("replay", str(log), "--json", "--baseline", str(baseline)),
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    alerts = [json.loads(line) for line in out.stdout.splitlines()]
    drops = [a for a in alerts if a["detector"] == "throughput_drop" and a["state"] == "firing"]
    assert len(drops) == 1, (alerts, out.stderr)
    assert "cut" not in out.stderr
    # A log without stamps runs on the bar's counter, ending at the file's mtime.
    from dflash_watch.parsers.numbers import parse_clock

    last = raw.rstrip(b"\n").rsplit(b"\r", 1)[1].decode()
    total_s = parse_clock(last.split("[")[1].split(",")[0].split("<")[0])
    assert total_s is not None, last
    start = os.stat(log).st_mtime - total_s
    since = drops[0]["evidence"]["since"] - start
    assert drop_s - 2 <= since <= drop_s + 30, (since, drop_s)
    assert drops[0]["evidence"]["tokens_per_s"] == pytest.approx(400, rel=0.05)


# -- Lightning's Rich bar: nothing in the file, said once ---------------------

# A real Lightning fit on CPU, a step every 0.2 s, with the Rich progress
# bar (Lightning's default where rich is installed) or TQDMProgressBar.
LIGHTNING_FIT = textwrap.dedent(r"""
    import sys, time
    import torch
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def training_step(self, batch, i):
            time.sleep(0.2)
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    if sys.argv[1] == "rich":
        from lightning.pytorch.callbacks import RichProgressBar as Bar
    else:
        from lightning.pytorch.callbacks import TQDMProgressBar as Bar
    n = int(sys.argv[2]) * 4
    data = DataLoader(TensorDataset(torch.randn(n, 8), torch.randn(n, 1)), batch_size=4)
    trainer = L.Trainer(
        max_epochs=1, accelerator="cpu", callbacks=[Bar()], logger=False, enable_checkpointing=False
    )
    trainer.fit(Tiny(), data)
""")


def _lightning_run(tmp_path: Path, bar: str, steps: int, log: Path) -> subprocess.Popen[bytes]:
    script = tmp_path / f"fit_{bar}.py"
    script.write_text(LIGHTNING_FIT)
    with open(log, "wb") as out:  # ``python fit.py > log 2>&1``
        cmd = [sys.executable, str(script), bar, str(steps)]
        return subprocess.Popen(cmd, stdout=out, stderr=out, env=_env())


needs_lightning = pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None or importlib.util.find_spec("torch") is None,
    reason="needs lightning and torch",
)


@needs_lightning
@pytest.mark.skipif(importlib.util.find_spec("rich") is None, reason="Lightning's Rich bar needs rich")
@pytest.mark.slow
def test_a_lightning_run_whose_rich_bar_writes_nothing_is_said_once_live(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    config = tmp_path / "watch.toml"
    config.write_text("[detectors]\nstall_min_s = 3\n")  # "no progress for a while": the stall's minimum
    watch = subprocess.Popen(
        _cli("headless", "--log", str(log), "--no-gpu", "--config", str(config)),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )
    fit = _lightning_run(tmp_path, "rich", 150, log)
    hint, latency = None, None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not log.exists() or b"GPU available" not in log.read_bytes()):
            time.sleep(0.1)
        banner = time.monotonic()
        assert watch.stderr is not None
        while hint is None and time.monotonic() < banner + 20 and fit.poll() is None:
            ready, _, _ = select.select([watch.stderr], [], [], 0.5)
            if ready:
                line = watch.stderr.readline()
                if "RichProgressBar" in line:
                    hint, latency = line, time.monotonic() - banner
        assert fit.poll() is None, "the fit ended before the hint could be due"
        time.sleep(2.0)  # and it is said once
    finally:
        fit.kill()
        fit.wait()
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=15)
    assert watch.returncode == 0, err
    assert hint is not None, err
    # stall_min_s after the banner was first read, at a tick.
    assert 3.0 <= latency < 8.0, latency
    assert "RichProgressBar" not in err  # once
    assert "TQDMProgressBar" in hint and "dflash_watch.probe.lightning" in hint
    print(f"banner to hint: {latency:.1f} s")
    assert out == ""  # a notice, not an alert


@needs_lightning
@pytest.mark.slow
def test_a_lightning_log_says_it_in_replay_only_when_its_bar_left_nothing(tmp_path: Path) -> None:
    """Real fits: the Rich bar's log gets the notice once (its one line at
    the end, a loss, is no progress); TQDMProgressBar's log does not."""
    bars = ("rich", "tqdm") if importlib.util.find_spec("rich") else ("tqdm",)
    fits = {bar: _lightning_run(tmp_path, bar, 3, tmp_path / f"{bar}.log") for bar in bars}  # side by side
    runs = {}
    for bar, proc in fits.items():
        log = tmp_path / f"{bar}.log"
        assert proc.wait(timeout=120) == 0, log.read_text(errors="replace")
        runs[bar] = subprocess.run(
            _cli("replay", str(log), "--json"), capture_output=True, text=True, timeout=60, check=False
        )
    assert all(r.returncode == 0 for r in runs.values())
    assert "RichProgressBar" not in runs["tqdm"].stderr
    if "rich" in runs:
        assert runs["rich"].stderr.count("RichProgressBar") == 1, runs["rich"].stderr


def test_a_log_record_glued_after_the_bar_read_live_is_not_taken_for_a_state(tmp_path: Path) -> None:
    """tqdm and logging on one stream: a record lands after the bar's last
    redraw on the same line. Its step (0-based loop: "step 9" while the bar
    shows 9/40) is at or below the bar's: it is still this record's only
    reading, not a redraw seen live."""
    monitor = Monitor()
    seen = _spy(monitor)
    path = str(tmp_path / "train.log")
    bars = [f" {k * 100 // 40:2d}%|##        | {k}/40 [00:{k:02d}<00:30,  1.00it/s]" for k in range(8, 10)]
    monitor.feed_partial(path, "\r".join(bars) + "\n", 1, 100.0)
    seen.clear()
    record = "2026-12-02 21:25:53,887 INFO step 9 | loss 2.31 | 21500 tok/s"
    monitor.feed_text(path, "\r" + "\r".join(bars) + record + "\n", 1, 101.0)
    progress = [p for p in seen if type(p).__name__ == "Progress"]
    assert [(p.step, p.loss, p.tokens_per_s) for p in progress] == [(9, 2.31, 21500.0)]


def test_a_record_after_tqdms_clear_caught_half_written_is_read_once_whole(tmp_path: Path) -> None:
    """``logging_redirect_tqdm``: tqdm clears its bar ('\\r', blanks, '\\r')
    and the record follows on that line. A look that catches the record half
    written must not read it as a state of the bar (its tok/s cut short,
    dated on arrival): it is read once, whole, with its own stamp, when its
    newline comes."""
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    monitor = Monitor()
    seen = _spy(monitor)
    path = str(log)
    bars = "".join(f"\r {k * 100 // 40:2d}%|##        | {k}/40 [00:{k:02d}<00:30,  1.00it/s]" for k in range(8, 10))
    record = "2026-12-02 21:25:53,887 INFO step 9 | loss 2.31 | 21500 tok/s\n"
    with LogTailer([path], use_watchdog=False) as tailer, open(log, "ab") as fh:
        for text, now in ((bars, 100.0), ("\r" + " " * 60 + "\r" + record[:44], 101.0), (record[44:48], 102.0),
                          (record[48:], 103.0)):
            fh.write(text.encode())
            fh.flush()
            for chunk in tailer.poll():
                if isinstance(chunk, Chunk) and chunk.partial:
                    monitor.feed_partial(chunk.path, chunk.text, chunk.first_lineno, now)
                elif isinstance(chunk, Chunk):
                    monitor.feed_text(chunk.path, chunk.text, chunk.first_lineno, now)
    records = [p for p in seen if type(p).__name__ == "Progress" and p.elapsed_s is None]
    assert [(p.step, p.loss, p.tokens_per_s) for p in records] == [(9, 2.31, 21500.0)]
    assert [p.step for p in seen if type(p).__name__ == "Progress" and p.elapsed_s is not None][-1:] == [9]
