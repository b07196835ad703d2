"""Dynamo's recompile messages (parsers/torchlog.py), through the CrashAssembler."""

from __future__ import annotations

import textwrap

from dflash_watch.parsers.crash.torchlog import RecompileBlock, clean_reason, strip_logger
from dflash_watch.parsers.crash.tracebacks import CrashAssembler
from dflash_watch.parsers.events import Crash, Recompile


def run(text: str) -> list:
    assembler = CrashAssembler("t")
    out = []
    for i, line in enumerate(textwrap.dedent(text).strip("\n").split("\n"), 1):
        out += assembler.feed(line, i, 100.0 + i)
    out += assembler.flush(1000.0)
    return out


def test_glog_limit_warning_with_rank_prefix() -> None:
    out = run("""\
        [rank3]:W0531 18:55:20.328000 627698 torch/_dynamo/convert_frame.py:1743] [1/8] torch._dynamo hit config.recompile_limit (8)
        [rank3]:W0531 18:55:20.328000 627698 torch/_dynamo/convert_frame.py:1743] [1/8]    function: 'muon_update' (/w/train.py:571)
        [rank3]:W0531 18:55:20.328000 627698 torch/_dynamo/convert_frame.py:1743] [1/8]    last reason: 1/7: ___as_tensor(mu).item() == 0.94  # (unknown source)
        [rank3]:W0531 18:55:20.328000 627698 torch/_dynamo/convert_frame.py:1743] [1/8] To log all recompilation reasons, use TORCH_LOGS="recompiles".
        [rank3]:W0531 18:55:20.328000 627698 torch/_dynamo/convert_frame.py:1743] [1/8] To diagnose recompilation issues, see https://x
        step:5/125 train_time:19.126s
    """)
    assert out == [Recompile(time=101.0, source="t:1", function="muon_update", reason="___as_tensor(mu).item() == 0.94",
                             limit=8, hit_limit=True, fatal=False, rank=3)]


def test_old_logging_format_cache_size_limit() -> None:
    out = run("""\
        [2023-10-01 10:00:00,123] torch._dynamo.convert_frame: [WARNING] torch._dynamo hit config.cache_size_limit (64)
           function: 'forward' (/w/model.py:12)
           last reason: L['x'].size()[0] == 3
        To log all recompilation reasons, use TORCH_LOGS="recompiles".
        To diagnose recompilation issues, see https://pytorch.org/docs/master/compile/troubleshooting.html.
    """)
    [rec] = out
    assert (rec.function, rec.reason, rec.limit, rec.rank) == ("forward", "L['x'].size()[0] == 3", 64, None)


def test_torch_logs_recompiles_lines() -> None:
    out = run("""\
        V0601 10:00:00.000000 42 torch/_dynamo/guards.py:2791] [0/1] [__recompiles] Recompiling function forward in /w/model.py:12
        V0601 10:00:00.000000 42 torch/_dynamo/guards.py:2791] [0/1] [__recompiles]     triggered by the following guard failure(s):
        V0601 10:00:00.000000 42 torch/_dynamo/guards.py:2791] [0/1] [__recompiles]     - 0/0: L['x'].size()[0] == 3
        V0601 10:00:00.000000 42 torch/_dynamo/guards.py:2791] [0/1] [__recompiles]     - 0/0: L['y'] == 1
        step 2
    """)
    assert out == [Recompile(time=101.0, source="t:1", function="forward", reason="L['x'].size()[0] == 3",
                             limit=None, hit_limit=False, fatal=False, rank=None)]


def test_fail_on_recompile_limit_in_a_traceback_gives_fatal_recompile_and_crash() -> None:
    out = run("""\
        W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8] torch._dynamo hit config.recompile_limit (8)
        W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8]    function: 'step' (/w/opt.py:621)
        W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8]    last reason: 2/7: x == 3
        Traceback (most recent call last):
          File "/w/train.py", line 9, in <module>
            opt.step()
        torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True.
    """)
    warning, fatal, crash = out
    assert isinstance(crash, Crash) and (crash.kind, crash.cause, crash.source) == ("compile_error", "recompile_limit", "t:7")
    assert (warning.fatal, fatal.fatal, fatal.function, fatal.reason, fatal.source) == (False, True, "step", "x == 3", "t:7")


def test_interleaved_ranks_keep_their_own_blocks() -> None:
    head = "W0531 18:55:20.328000 1 torch/_dynamo/convert_frame.py:1743] [1/8] "
    out = run(f"""\
        [rank0]:{head}torch._dynamo hit config.recompile_limit (8)
        [rank1]:{head}torch._dynamo hit config.recompile_limit (8)
        [rank0]:{head}   function: 'a' (/w/x.py:1)
        [rank1]:{head}   function: 'b' (/w/x.py:2)
    """)
    assert sorted((r.rank, r.function) for r in out) == [(0, "a"), (1, "b")]


def test_helpers() -> None:
    assert strip_logger("W0531 18:55:20.328000 1 torch/x.py:1] [1/8] hello") == ("hello", True)
    assert strip_logger("plain") == ("plain", False)
    assert clean_reason(" 0/7: kv_cache.pos == 10     ") == "kv_cache.pos == 10"
    assert RecompileBlock.start("unrelated", "s:1", 0.0, None) is None


def test_recompiles_logged_at_debug_level_carry_their_own_times() -> None:
    """``TORCH_LOGS=recompiles`` lines start with ``V`` (torch's DEBUG):
    each recompile is dated by its own stamp, not the stamped line before."""
    from datetime import UTC, datetime

    from dflash_watch.parsers.stream import LogStream

    lines = ["2026-12-05 10:00:00,000 - INFO - train - step 5 | loss 0.5 | tokens/s 20000.0"]
    for i in range(1, 9):
        t = f"10:{30 * i // 60:02d}:{30 * i % 60:02d}.000000"
        head = f"V1205 {t} 21372 torch/_dynamo/guards.py:5396] [0/{i}] [__recompiles]"
        lines += [f"{head} Recompiling function forward in /x/model.py:67",
                  f"{head}     triggered by the following guard failure(s):",
                  f"{head}     - 0/{i - 1}: tensor 'x' size mismatch at index 1. expected {i * 8}, actual {i * 8 + 8}"]
    lines.append("2026-12-05 10:05:00,000 - INFO - train - step 10 | loss 0.5 | tokens/s 20000.0")
    stream = LogStream("t.log", tz=UTC)
    events = stream.feed("\n".join(lines) + "\n", 1, 0.0) + stream.flush(0.0)
    start = datetime(2026, 12, 5, 10, 0, tzinfo=UTC).timestamp()
    assert [e.time - start for e in events if type(e) is Recompile] == [30.0 * i for i in range(1, 9)]


def test_a_debug_level_torch_line_far_back_is_still_the_streams_clock() -> None:
    """The latest stamp of a chunk is searched for by a hint where its last
    lines have none: a ``V`` line (torch's DEBUG, no event) is one, so the
    traceback after ten plain lines takes its time, not the INFO line's
    minutes before."""
    from datetime import UTC, datetime

    from dflash_watch.parsers.stream import LogStream

    stream = LogStream("t.log", tz=UTC, default_year=2026)  # as ``ingest.log_stream`` makes it
    head = "2026-12-05 10:00:00,000 - INFO - train - start\n"
    verbose = "V1205 10:04:00.000000 21372 torch/_dynamo/convert_frame.py:1003] [0/1] torchdynamo start tracing f\n"
    stream.feed(head + verbose + "".join(f"plain line {i}\n" for i in range(10)), 1, 0.0)
    crash = "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\nRuntimeError: boom\n"
    events = stream.feed(crash, 13, 0.0) + stream.flush(0.0)
    assert [e.time for e in events if type(e) is Crash] == [datetime(2026, 12, 5, 10, 4, tzinfo=UTC).timestamp()]
