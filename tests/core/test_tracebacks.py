"""CrashAssembler: tracebacks and fatal one-liners from hand-written text,
the real-world corpus (/work/shared/realworld, labels in SOURCES.md) and
real torch 2.13 tracebacks captured as fixtures."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_watch.parsers.crash.signatures import COLLATERAL_CAUSES, WEAK_CAUSES
from dflash_watch.parsers.crash.tracebacks import TRIGGERS, CrashAssembler
from dflash_watch.parsers.events import Crash, Recompile

REALWORLD = Path(__file__).resolve().parents[2].parent / "shared" / "realworld"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tracebacks"
KINDS = {"cuda_oom", "nccl_timeout", "missing_module", "cuda_error", "compile_error", "killed", "host_oom", "segfault",
         "exception"}


def feed_lines(lines: list[str], name: str = "log", skip_untriggered: bool = False) -> list[Crash | Recompile]:
    """Feed like the stream does: one line at a time, time = line number."""
    assembler = CrashAssembler(name)
    out: list[Crash | Recompile] = []
    for lineno, raw in enumerate(lines, 1):
        for segment in raw.rstrip("\r").split("\r"):
            if skip_untriggered and not assembler.is_open and not any(t in segment for t in TRIGGERS):
                continue
            out += assembler.feed(segment, lineno, float(lineno))
    out += assembler.flush(1e9)
    assert not assembler.is_open
    return out


def feed_text(text: str, name: str = "log") -> list[Crash | Recompile]:
    return feed_lines(textwrap.dedent(text).strip("\n").split("\n"), name)


def crashes(events: list) -> list[Crash]:
    return [e for e in events if isinstance(e, Crash)]


def recompiles(events: list) -> list[Recompile]:
    return [e for e in events if isinstance(e, Recompile)]


def realworld(prefix: str) -> list[str]:
    if not REALWORLD.is_dir():
        pytest.skip(f"real-world corpus not found at {REALWORLD}")
    matches = sorted(REALWORLD.glob(f"{prefix}_*.log"))
    if not matches:
        pytest.skip(f"real-world file {prefix}_*.log absent")
    return matches[0].read_bytes().decode("utf-8", "replace").split("\n")


def lineno(crash: Crash | Recompile) -> int:
    return int(crash.source.rsplit(":", 1)[1])


# -- hand-written forms --------------------------------------------------------

OOM = """\
    some training output
    Traceback (most recent call last):
      File "/w/train.py", line 10, in <module>
        main()
      File "/w/train.py", line 7, in main
        loss = model(x)
      File "/venv/torch/nn/modules/module.py", line 1750, in _call_impl
        return forward_call(*args, **kwargs)
      File "/w/model.py", line 33, in forward
        h = self.mlp(h)
    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB
    [2025-12-23 12:38:58,629] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 1632263
"""


def test_plain_traceback_becomes_one_crash_with_frames_and_source_of_exception_line() -> None:
    [crash] = crashes(feed_text(OOM, "train.log"))
    assert (crash.detector, crash.kind, crash.cause) == ("crash", "cuda_oom", None)
    assert crash.exc_type == "torch.OutOfMemoryError"
    assert crash.message.startswith("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert crash.source == "train.log:11" and crash.time == 11.0
    assert [f.function for f in crash.frames] == ["<module>", "main", "_call_impl", "forward"]
    assert crash.frames[-1].code == "h = self.mlp(h)" and crash.frames[-1].line == 33
    assert crash.text[0] == "Traceback (most recent call last):"
    # A message may span lines, so only a line that starts a new record ends it.
    assert not any("Killing subprocess" in line for line in crash.text)
    assert "\n" not in crash.message
    assert crash.signature == "OutOfMemoryError @ model.py:forward < module.py:_call_impl < train.py:main"


def test_signature_is_the_same_across_ranks_line_numbers_and_sizes() -> None:
    other = OOM.replace("line 33", "line 35").replace("2.00 GiB", "4.00 GiB").replace("GPU 3", "GPU 5")
    ranked = "\n".join("[rank5]: " + line for line in textwrap.dedent(other).splitlines())
    [a] = crashes(feed_text(OOM))
    [b] = crashes(feed_lines(ranked.split("\n")))
    assert b.rank == 5 and a.rank is None
    assert a.signature == b.signature


def test_interleaved_rank_tracebacks_assemble_separately() -> None:
    lines = []
    body = textwrap.dedent(OOM).strip("\n").splitlines()[1:-1]
    for line in body:
        for rank in (0, 1):
            lines.append(f"[rank{rank}]: {line}")
            lines.append(f"[rank{rank}]:W0531 18:55:20.328000 123 some/logger.py:1] unrelated warning")
    events = feed_lines(lines)
    found = crashes(events)
    assert sorted(c.rank for c in found) == [0, 1]
    assert all(c.kind == "cuda_oom" and len(c.frames) == 4 for c in found)


def test_foreign_lines_between_frames_do_not_break_a_traceback() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/a.py", line 1, in <module>
            run()
        step 100 | loss 2.3 | tok/s 12000
        W0531 18:55:20.328000 123 torch/distributed/run.py:1] a warning
          File "/w/a.py", line 5, in run
            raise ValueError("bad")
        ValueError: bad
    """
    [crash] = crashes(feed_text(text))
    assert crash.exc_type == "ValueError" and crash.message == "bad"
    assert [f.function for f in crash.frames] == ["<module>", "run"]
    assert crash.kind == "exception" and crash.cause is None


def test_chained_exceptions_make_one_crash_classified_over_the_whole_chain() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/a.py", line 3, in step
            torch.cuda.synchronize()
        RuntimeError: CUDA error: an illegal memory access was encountered
        CUDA kernel errors might be asynchronously reported at some other API call.

        The above exception was the direct cause of the following exception:

        Traceback (most recent call last):
          File "/w/a.py", line 9, in main
            step()
          File "/w/a.py", line 5, in step
            raise TrainingFailed("step failed") from e
        mylib.TrainingFailed: step failed
        After the crash
    """
    events = crashes(feed_text(text))
    assert len(events) == 1
    crash = events[0]
    assert crash.exc_type == "mylib.TrainingFailed"
    assert (crash.kind, crash.cause) == ("cuda_error", "illegal_memory_access")
    assert any("illegal memory access" in line for line in crash.text)
    assert [f.function for f in crash.frames] == ["main", "step"]
    assert crash.source == "log:14"


def test_during_handling_chain_and_keyboard_interrupt() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/a.py", line 3, in <module>
            train()
        KeyboardInterrupt

        During handling of the above exception, another exception occurred:

        Traceback (most recent call last):
          File "/w/a.py", line 5, in <module>
            save()
        KeyboardInterrupt
    """
    [crash] = crashes(feed_text(text))
    assert (crash.kind, crash.cause) == ("exception", "keyboard_interrupt")
    assert crash.message == ""


def test_python311_carets_thread_header_and_multiline_message() -> None:
    text = """\
        Exception in thread drafter (run):
        Traceback (most recent call last):
          File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner
            self.run()
          File "/w/draft.py", line 20, in run
            out = self.model(x)
                  ^^^^^^^^^^^^^
        ValueError: shapes do not match:
        left (4, 8)
        right (8, 3)
        done
    """
    [crash] = crashes(feed_text(text))
    assert crash.thread == "drafter (run)"
    assert crash.frames[-1].code == "out = self.model(x)"
    assert crash.message == "shapes do not match:\nleft (4, 8)\nright (8, 3)\ndone"


def test_dynamo_footer_and_user_code_section_stay_in_the_crash() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/train.py", line 3, in <module>
            loss = compiled(x)
          File "/venv/torch/_dynamo/eval_frame.py", line 655, in _fn
            return fn(*args, **kwargs)
        torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
        RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered

        from user code:
           File "/w/model.py", line 12, in forward
            return self.attn(x)

        Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch).
        step 5 | loss 1.0
    """
    [crash] = crashes(feed_text(text))
    assert crash.exc_type == "torch._dynamo.exc.BackendCompilerFailed"
    # The CUDA failure inside the compile error is the more useful class.
    assert (crash.kind, crash.cause) == ("cuda_error", "illegal_memory_access")
    assert any(line.startswith("Set TORCHDYNAMO_VERBOSE") for line in crash.text)
    assert [f.function for f in crash.frames] == ["<module>", "_fn"]
    assert "step 5 | loss 1.0" not in crash.text


def test_inductor_error_and_backend_failure_are_compile_errors() -> None:
    text = """\
        Traceback (most recent call last):
          File "/venv/torch/_inductor/async_compile.py", line 447, in _wait_futures
            raise RuntimeError(
        torch._inductor.exc.InductorError: RuntimeError: A compilation subprocess exited unexpectedly.

        Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace
    """
    [crash] = crashes(feed_text(text))
    assert (crash.kind, crash.cause) == ("compile_error", None)
    assert crash.message.startswith("RuntimeError: A compilation subprocess")


def test_numpy_private_exception_class_is_read_and_is_host_oom() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/mask.py", line 30, in pair_mask
            return np.ones((n_tokens, n_tokens), dtype=np.bool_)
        numpy._core._exceptions._ArrayMemoryError: Unable to allocate 256. TiB for an array with shape (16777216, 16777216)
    """
    [crash] = crashes(feed_text(text))
    assert (crash.exc_type, crash.kind) == ("numpy._core._exceptions._ArrayMemoryError", "host_oom")
    assert crash.source == "log:4"


def test_dynamo_graph_break_footer_keeps_a_chain_one_crash() -> None:
    text = """\
        Traceback (most recent call last):
          File "/venv/torch/_dynamo/exc.py", line 727, in unimplemented
            raise Unsupported(msg, gb_type, skip_frame)
        torch._dynamo.exc.Unsupported: Dynamo recompile limit exceeded
          Explanation: Dynamo attempted to recompile the code object too many times.

          Developer debug context: Limit type: recompile_limit

         For more details about this graph break, please visit: https://meta-pytorch.github.io/gb0039.html

        The above exception was the direct cause of the following exception:

        Traceback (most recent call last):
          File "/w/train.py", line 70, in <module>
            loss = step(batch)
        torch._dynamo.exc.FailOnRecompileLimitHit: Hard failure due to fail_on_recompile_limit_hit
    """
    [crash] = crashes(feed_text(text))
    assert (crash.kind, crash.cause, crash.exc_type) == (
        "compile_error", "recompile_limit", "torch._dynamo.exc.FailOnRecompileLimitHit")


def test_missing_module_names_the_module() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/train.py", line 1, in <module>
            import flash_attn
        ModuleNotFoundError: No module named 'flash_attn'
    """
    [crash] = crashes(feed_text(text))
    assert crash.kind == "missing_module" and "'flash_attn'" in crash.message


def test_disk_full_oserror_cause() -> None:
    text = """\
        Traceback (most recent call last):
          File "/w/save.py", line 4, in save
            torch.save(state, path)
        OSError: [Errno 28] No space left on device
    """
    [crash] = crashes(feed_text(text))
    assert (crash.kind, crash.cause) == ("exception", "disk_full")


def test_huge_traceback_is_bounded_but_still_classified() -> None:
    lines = ["Traceback (most recent call last):"]
    lines.append("  RuntimeError context: CUDA out of memory early mention")
    for i in range(3000):
        lines += [f'  File "/w/r.py", line {i}, in f{i}', "    f()"]
    lines.append("RecursionError: maximum recursion depth exceeded")
    [crash] = crashes(feed_lines(lines))
    assert len(crash.text) <= 201
    assert any("lines cut" in line for line in crash.text)
    assert crash.frames[-1].function == "f2999"
    assert crash.exc_type == "RecursionError"


def test_fx_tracing_forms() -> None:
    detected = """\
        Traceback (most recent call last):
          File "/w/draft.py", line 11, in <module>
            torch.fx.symbolic_trace(Drafter())
          File "/venv/torch/_dynamo/eval_frame.py", line 1120, in compile_wrapper
            raise RuntimeError(
        RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function. This is not supported at the moment.
    """
    unexpected_key = """\
        Exception in thread drafter:
        Traceback (most recent call last):
          File "/w/draft.py", line 30, in run
            gm = torch.fx.symbolic_trace(self.model)
          File "/venv/torch/fx/_symbolic_trace.py", line 888, in module_call_wrapper
            return self.call_module(mod, forward, args, kwargs)
          File "/venv/torch/fx/_symbolic_trace.py", line 584, in call_module
            raise AssertionError(f"Unexpected key {key}, expected {module_key}")
        AssertionError: Unexpected key layers.3, expected layers.2
    """
    plain_name_error = """\
        Traceback (most recent call last):
          File "/w/a.py", line 3, in f
            x = y
        NameError: module is not installed as a submodule
    """
    [a] = crashes(feed_text(detected))
    [b] = crashes(feed_text(unexpected_key))
    [c] = crashes(feed_text(plain_name_error))
    assert (a.detector, a.cause) == ("fx_tracing", "nested_fx_trace")
    assert (b.detector, b.cause, b.thread) == ("fx_tracing", "module_stack_corrupted", "drafter")
    assert c.detector == "crash"  # the same words without the tracer's frames are no FX collision


def test_hugging_face_tracer_capital_m_is_fx_tracing() -> None:
    # transformers.utils.fx.HFTracer.path_of_module raises with a capital M
    # (torch's own Tracer writes "module is ..."); a compiled thread's module
    # call caught by the tracer's global patch dies this way.
    text = """\
        Exception in thread target-server:
        Traceback (most recent call last):
          File "/w/serve.py", line 40, in serve
            out = self.target(x)
          File "/venv/torch/fx/_symbolic_trace.py", line 829, in module_call_wrapper
            return self.call_module(mod, forward, args, kwargs)
          File "/venv/transformers/utils/fx.py", line 1211, in call_module
            return super().call_module(m, forward, args, kwargs)
          File "/venv/torch/fx/_symbolic_trace.py", line 528, in call_module
            module_qualified_name = self.path_of_module(m)
          File "/venv/transformers/utils/fx.py", line 1160, in path_of_module
            raise NameError("Module is not installed as a submodule")
        NameError: Module is not installed as a submodule
    """
    [crash] = crashes(feed_text(text))
    assert (crash.detector, crash.kind, crash.cause, crash.thread) == (
        "fx_tracing", "fx_tracing", "foreign_module_call", "target-server")
    # A pasted tail that kept only HF's own tracer frame.
    tail = "\n".join(textwrap.dedent(text).strip("\n").split("\n")[-3:])
    [cut] = crashes(feed_text(tail))
    assert (cut.detector, cut.cause) == ("fx_tracing", "foreign_module_call")


@pytest.mark.parametrize(
    ("fixture", "exc_type", "cause", "thread"),
    [
        ("fx_symbolic_trace_of_compiled_fn_one_thread_torch2.13.0.txt", "RuntimeError", "nested_fx_trace", None),
        ("fx_trace_vs_compiled_thread_detected_torch2.13.0.txt", "RuntimeError", "nested_fx_trace", "target-server"),
        ("fx_trace_vs_compiled_thread_nameerror_torch2.13.0.txt", "NameError", "foreign_module_call", "target-server"),
    ],
)
def test_real_torch_fx_tracebacks_from_fixtures(fixture: str, exc_type: str, cause: str, thread: str | None) -> None:
    lines = (FIXTURES / fixture).read_text(encoding="utf-8").split("\n")
    [crash] = crashes(feed_lines(lines, "fx.log"))
    assert (crash.detector, crash.exc_type, crash.cause, crash.thread) == ("fx_tracing", exc_type, cause, thread)
    assert crash.source == f"fx.log:{next(i for i, l in enumerate(lines, 1) if l.startswith(exc_type + ':'))}"


def test_bare_torch_exception_and_child_failed_report() -> None:
    text = """\
        torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
        ============================================================
        train.py FAILED
        ------------------------------------------------------------
        Failures:
        [1]:
          time      : 2025-01-01_00:00:00
          host      : node1
          rank      : 3 (local_rank: 3)
          exitcode  : -9 (pid: 4242)
          error_file: <N/A>
          traceback : Signal 9 (SIGKILL) received by PID 4242
        ------------------------------------------------------------
        Root Cause (first observed failure):
        [0]:
          time      : 2025-01-01_00:00:00
          host      : node1
          rank      : 2 (local_rank: 2)
          exitcode  : -9 (pid: 4241)
          error_file: <N/A>
          traceback : Signal 9 (SIGKILL) received by PID 4241
        ============================================================
        after
    """
    [crash] = crashes(feed_text(text))
    assert (crash.kind, crash.cause, crash.rank) == ("killed", "sigkill", 2)
    assert "exitcode -9" in crash.message and "pid 4241" in crash.message and "ranks 3" in crash.message
    assert crash.signature == "ChildFailedError(exitcode=-9)"
    assert crash.source == "log:1"


@pytest.mark.parametrize(
    ("line", "kind", "cause"),
    [
        ("slurmstepd: error: *** STEP 1.0 ON n1 CANCELLED AT 2021-05-23T08:29:53 ***", "killed", "slurm_cancelled"),
        ("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***", "killed",
         "slurm_time_limit"),
        ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=123.0. Some of your processes may have been "
         "killed by the cgroup out-of-memory handler.", "host_oom", "oom_killer"),
        ("[Tue Dec  1 09:00:00 2026] Out of memory: Killed process 4242 (python) total-vm:99kB", "host_oom",
         "oom_killer"),
        ("Signal 9 (SIGKILL) received by PID 777", "killed", "sigkill"),
        ("Killed", "killed", "sigkill"),
        ("run.sh: line 12: 31337 Killed                  python train.py", "killed", "sigkill"),
        ("[rank3]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation "
         "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 "
         "milliseconds before timing out.", "nccl_timeout", None),
    ],
)
def test_one_line_fatal_signals(line: str, kind: str, cause: str | None) -> None:
    [crash] = crashes(feed_lines(["before", line, "after"]))
    assert (crash.detector, crash.kind, crash.cause, crash.source) == ("crash", kind, cause, "log:2")
    assert not any(ch.isdigit() for ch in crash.signature.split(":", 1)[1])


def test_signals_are_deduplicated_per_rank_and_job() -> None:
    watchdog = ("[rank{r}]:[E1218 20:27:21.4 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST) ran for 600081 milliseconds")
    lines = [watchdog.format(r=0), watchdog.format(r=1), watchdog.format(r=0),
             "slurmstepd: error: *** STEP 5.0 ON n CANCELLED AT 2021-01-01T00:00:00 ***",
             "slurmstepd: error: *** JOB 5 ON n CANCELLED AT 2021-01-01T00:00:00 ***"]
    found = crashes(feed_lines(lines))
    assert [(c.kind, c.rank) for c in found] == [("nccl_timeout", 0), ("nccl_timeout", 1), ("killed", None)]
    assert found[0].signature == found[1].signature


def test_empty_name_gives_bare_line_numbers_for_the_caller_to_prefix() -> None:
    [crash] = crashes(feed_text(OOM, ""))
    [signal] = crashes(feed_lines(["x", "Killed"], ""))
    assert (crash.source, signal.source) == ("11", "2")


def test_quiet_lines_never_open_anything() -> None:
    assembler = CrashAssembler()
    for i, line in enumerate(["step 1 | loss 2.0", "Killing subprocess 12", "Error rate 0.1", "^C"], 1):
        assert assembler.feed(line, i, float(i)) == []
    assert not assembler.is_open


# -- the real-world corpus -------------------------------------------------------


def test_realworld_01_nccl_watchdog_timeout_on_ranks_0_and_1() -> None:
    found = crashes(feed_lines(realworld("01"), "01"))
    # std::terminate after the NCCL abort (lines 128-129): a consequence, marked as one.
    assert [(c.cause, lineno(c)) for c in found if c.cause in COLLATERAL_CAUSES] == [("terminate", 128)]
    found = [c for c in found if c.cause not in COLLATERAL_CAUSES]
    assert [(c.kind, c.rank, lineno(c)) for c in found] == [("nccl_timeout", 0, 98), ("nccl_timeout", 1, 99)]
    assert len({c.signature for c in found}) == 1


def test_realworld_02_four_ooms_each_with_a_rank0_copy() -> None:
    found = crashes(feed_lines(realworld("02"), "02"))
    assert {c.kind for c in found} == {"cuda_oom"}
    assert sorted((lineno(c), c.rank) for c in found) == [
        (184, None), (236, 0), (402, None), (420, 0), (573, None), (591, 0), (876, None), (922, 0)]
    first = min(found, key=lineno)
    assert "Tried to allocate 12.00 MiB" in first.message
    assert len({c.signature for c in found}) == 2  # forward OOM (train and predict) vs. backward OOM


@pytest.mark.parametrize("prefix", ["03", "04", "07", "10", "16"])
def test_realworld_healthy_logs_have_no_crash(prefix: str) -> None:
    # 07 ends with a bare "^C" and the shell's "exit 1": the user's own interrupt with no traceback and
    # no signal line; no Crash (the process_exit detector, not this parser, reports the exit).
    assert crashes(feed_lines(realworld(prefix), prefix)) == []


def test_realworld_05_recompile_limit_warning_is_not_fatal() -> None:
    events = feed_lines(realworld("05"), "05")
    assert crashes(events) == []
    [rec] = recompiles(events)
    assert (rec.function, rec.limit, rec.hit_limit, rec.fatal, rec.rank) == ("muon_update", 8, True, False, 0)
    assert rec.reason == "___as_tensor(mu).item() == 0.9487903225806451"
    assert lineno(rec) == 23


def test_realworld_06_assertions_and_missing_module() -> None:
    found = crashes(feed_lines(realworld("06"), "06"))
    assert [(lineno(c), c.exc_type, c.kind) for c in found] == [
        (650, "AssertionError", "exception"), (1528, "ModuleNotFoundError", "missing_module"),
        (1737, "AssertionError", "exception")]
    assert found[1].message == "No module named 'datasets'"
    assert found[0].signature == found[2].signature


@pytest.mark.parametrize(("prefix", "line", "cause"), [("08", 1560, "slurm_cancelled"), ("09", 1919, "slurm_time_limit")])
def test_realworld_slurm_kills(prefix: str, line: int, cause: str) -> None:
    [crash] = crashes(feed_lines(realworld(prefix), prefix))
    assert (crash.kind, crash.cause, lineno(crash)) == ("killed", cause, line)


def test_realworld_11_inductor_error_tail() -> None:
    [crash] = crashes(feed_lines(realworld("11"), "11"))
    assert (crash.kind, crash.exc_type, lineno(crash)) == ("compile_error", "torch._inductor.exc.InductorError", 4)


def test_realworld_12_recompile_then_fatal_fail_on_recompile_limit() -> None:
    events = feed_lines(realworld("12"), "12")
    warning, fatal = recompiles(events)
    [crash] = crashes(events)
    assert (warning.function, warning.fatal, lineno(warning)) == ("dion2_post_orthogonalize", False, 1)
    assert warning.reason.startswith("tensor 'X[0]' size mismatch at index 1. expected 640, actual 8.")
    assert (fatal.fatal, fatal.function, fatal.limit, lineno(fatal)) == (True, "dion2_post_orthogonalize", 8, 5)
    assert (crash.kind, crash.cause, lineno(crash)) == ("compile_error", "recompile_limit", 5)


def test_realworld_13_child_failed_exit_1() -> None:
    [crash] = crashes(feed_lines(realworld("13"), "13"))
    assert (crash.kind, crash.cause, crash.rank, lineno(crash)) == ("exception", "child_failed", 0, 1)
    assert "train.py FAILED" in crash.message and "exitcode 1 (pid 78970)" in crash.message
    assert "ranks 1" in crash.message


def test_realworld_14_child_failed_sigkill() -> None:
    [crash] = crashes(feed_lines(realworld("14"), "14"))
    assert (crash.kind, crash.cause, crash.rank, lineno(crash)) == ("killed", "sigkill", 0, 10)
    assert "exitcode -9 (pid 14750)" in crash.message
    assert "Signal 9 (SIGKILL) received by PID 14750" in crash.message


def test_realworld_15_illegal_memory_access() -> None:
    [crash] = crashes(feed_lines(realworld("15"), "15"))
    assert (crash.kind, crash.cause, lineno(crash)) == ("cuda_error", "illegal_memory_access", 13)
    assert crash.frames[-1].function == "synchronize"


def test_realworld_17_garbled_accelerator_errors_still_classify() -> None:
    found = crashes(feed_lines(realworld("17"), "17"))
    cuda = [c for c in found if c.kind == "cuda_error"]
    assert cuda and all(c.cause == "invalid_device_ordinal" for c in cuda)
    assert min(lineno(c) for c in cuda) == 590
    assert all(590 <= lineno(c) < 1111 for c in cuda)
    child = [c for c in found if c.cause == "child_failed"]
    assert [lineno(c) for c in child] == [710, 924, 1111]
    assert child[0].rank == 1 and "scripts.base_train FAILED" in child[0].message
    interrupts = [c for c in found if c.cause == "keyboard_interrupt"]
    assert [lineno(c) for c in interrupts] == [1161, 1490]
    # torch elastic's own lines: SIGTERM to the siblings, the failed rank's exit code.
    stopping = [c for c in found if c.cause in WEAK_CAUSES]
    assert (lineno(stopping[0]), stopping[0].cause) == (695, "torchrun_stopping")
    assert (lineno(stopping[1]), stopping[1].cause, stopping[1].rank) == (696, "child_exit", 1)
    assert all(c.kind != "killed" for c in stopping)
    assert len(found) == len(cuda) + len(child) + len(interrupts) + len(stopping)
    assert not any(lineno(c) > 1999 for c in found)  # attempt 2 is healthy


def test_realworld_18_recompile_warning_is_not_a_crash() -> None:
    events = feed_lines(realworld("18"), "18")
    assert crashes(events) == []
    [rec] = recompiles(events)
    assert (rec.function, rec.reason, rec.rank, rec.fatal, lineno(rec)) == ("forward", "kv_cache.pos == 10", 0, False, 1067)


def test_realworld_19_oom_then_file_not_found_cascade() -> None:
    found = crashes(feed_lines(realworld("19"), "19"))
    assert (found[0].kind, found[0].rank, lineno(found[0])) == ("cuda_oom", 0, 541)
    child = [lineno(c) for c in found if c.cause == "child_failed"]
    assert child == [558, 607, 658, 712, 761, 812, 861]  # FAILED lines 560, 609, ... minus two
    exits = [lineno(c) for c in found if c.cause == "child_exit"]
    assert exits == [544, 593, 644, 698, 747, 798, 847]  # "failed (exitcode: 1) local_rank: 0"
    rest = [c for c in found[1:] if c.cause not in ("child_failed", "child_exit")]
    assert rest and all(c.exc_type == "FileNotFoundError" and c.kind == "exception" for c in rest)


def test_realworld_20_disk_full_on_all_ranks() -> None:
    found = crashes(feed_lines(realworld("20"), "20"))
    disk = [c for c in found if c.cause == "disk_full"]
    assert (lineno(disk[0]), disk[0].rank) == (1360, None)
    assert sorted(c.rank for c in disk[1:]) == list(range(8))
    assert all(1361 <= lineno(c) <= 1472 for c in disk[1:])
    assert len({c.signature for c in disk}) == 1
    child = [lineno(c) for c in found if c.cause == "child_failed"]
    assert child == [1498, 1649, 1826, 1977]


@pytest.mark.parametrize("prefix", ["01", "02", "06", "12", "17", "19", "20"])
def test_skipping_untriggered_lines_changes_nothing(prefix: str) -> None:
    lines = realworld(prefix)
    assert feed_lines(lines, prefix, skip_untriggered=True) == feed_lines(lines, prefix)


# -- robustness ----------------------------------------------------------------

_FRAGMENTS = [
    "Traceback (most recent call last):", '  File "/a.py", line 3, in f', "    x()", "    ^^^",
    "RuntimeError: CUDA error: invalid device ordinal", "KeyboardInterrupt", "", "The above exception was the "
    "direct cause of the following exception:", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "=" * 60, "  exitcode  : -9 (pid: 1)", "Root Cause (first observed failure):", "  rank      : x",
    "W0531 18:55:20.328000 1 torch/_dynamo/convert_frame.py:1743] [1/8] torch._dynamo hit config.recompile_limit (8)",
    "   function: 'f' (/a.py:1)", "   last reason: 1/7: x == 1", "Recompiling function f in /a.py:1",
    "    - 0/0: x", "Exception in thread t:", "slurmstepd: error: *** JOB 1 ON n CANCELLED AT x ***", "Killed",
    "torch._dynamo.exc.FailOnRecompileLimitHit: x", "from user code:", "Set TORCHDYNAMO_VERBOSE=1",
    "Fatal Python error: Segmentation fault", "Current thread 0x00007f0 (most recent call first):",
    '  File "/a.py", line 3 in f', "Extension modules: torch._C (total: 1)",
    "W1201 09:19:29.014000 9 api.py:1028] Sending process 9042 closing signal SIGTERM",
    "E1201 09:19:29.031000 9 api.py:1002] failed (exitcode: -11) local_rank: 1 (pid: 9043) of binary: x",
    "  traceback : Signal 11 (SIGSEGV) received by PID 9043", "Out of memory: Killed process 12 (python)",
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 1 TiB",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from(["", "[rank0]: ", "[rank1]:", "[default2]:", "\x1b[31m", "[1,3]<stderr>:"]),
    st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=60)),
), max_size=60))
def test_feed_never_raises_and_emits_valid_events(parts: list[tuple[str, str]]) -> None:
    assembler = CrashAssembler("h")
    out = []
    for i, (prefix, body) in enumerate(parts, 1):
        out += assembler.feed((prefix + body).replace("\n", " ").replace("\r", " "), i, float(i))
    out += assembler.flush(float(len(parts) + 1))
    assert not assembler.is_open
    for event in out:
        if isinstance(event, Crash):
            assert event.detector in {"crash", "fx_tracing"}
            assert event.detector == "fx_tracing" or event.kind in KINDS
            assert event.source.startswith("h:") and 1 <= lineno(event) <= len(parts)
            assert event.signature
            assert len(event.text) <= 201
        else:
            assert isinstance(event, Recompile)


def test_step_lines_after_a_traceback_are_no_part_of_its_message() -> None:
    """``torchrun ... > out 2>&1``: the traceback (stderr, unbuffered) comes
    first, the steps from before it (stdout, block-buffered) after it; they
    were read as its message's continuation (replay: "boom ... step 1 |
    loss 0.3356 | 1008.5ms step 2 ..."). A message's own second line stays."""
    lines = [
        "[default0]:[rank0]: Traceback (most recent call last):",
        '[default0]:[rank0]:   File "train.py", line 11, in <module>',
        '[default0]:[rank0]:     raise RuntimeError("boom: bad batch at step %d" % step)',
        "[default0]:[rank0]: RuntimeError: boom: bad batch at step 40",
        "[default0]:step 1 | loss 0.3356 | 1008.5ms",
        "[default0]:step 2 | loss 0.3426 | 1002.8ms",
        "[default0]:Epoch 1: 12/40 loss=0.31",
        "[default0]:{'loss': 0.31, 'epoch': 0.1}",
    ]
    (crash,) = [c for c in feed_lines(lines) if isinstance(c, Crash)]
    assert crash.message == "boom: bad batch at step 40"
    two = ["Traceback (most recent call last):", '  File "t.py", line 1, in <module>',
           "RuntimeError: CUDA out of memory.", "If reserved but unallocated memory is large try setting x"]
    (oom,) = [c for c in feed_lines(two) if isinstance(c, Crash)]
    assert oom.message.endswith("If reserved but unallocated memory is large try setting x")
