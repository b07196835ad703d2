"""The traceback the simulated drafter thread dies with.

Copied in shape from a real run: torch 2.13 (CPU build here), Python 3.11,
``torch.fx.symbolic_trace`` of a module holding a ``torch.compile``'d
submodule, called from a ``threading.Thread`` named ``drafter-0``. The torch
and threading frames (files, line numbers, functions, code, caret lines) are
what that run printed; only the user's frames are the invented DFlash code,
and the paths are those of a typical conda image. The detectors must
recognise this text, so it stays byte-for-byte what Python would print rather
than a paraphrase.
"""

from __future__ import annotations

from dataclasses import dataclass

PYTHON_LIB = "/opt/conda/lib/python3.11"
TORCH = f"{PYTHON_LIB}/site-packages/torch"
USER = "/workspace/dflash"

MESSAGE = (
    "Detected that you are using FX to symbolically trace a dynamo-optimized function. "
    "This is not supported at the moment."
)


@dataclass(frozen=True, slots=True)
class _Frame:
    file: str
    line: int
    function: str
    code: str
    # The part of ``code`` Python 3.11 underlines with carets; None when the
    # call is the whole line (Python then prints no caret line).
    underline: str | None = None


def _frames() -> tuple[_Frame, ...]:
    return (
        _Frame(f"{PYTHON_LIB}/threading.py", 1045, "_bootstrap_inner", "self.run()"),
        _Frame(f"{PYTHON_LIB}/threading.py", 982, "run", "self._target(*self._args, **self._kwargs)"),
        _Frame(
            f"{USER}/dflash/pipeline.py", 231, "drafter_worker",
            "loss, stats = self.drafter_step(batch)", "self.drafter_step(batch)",
        ),
        _Frame(
            f"{USER}/dflash/pipeline.py", 178, "drafter_step",
            "block = self.block_cache.get_or_trace(batch.draft_len)",
            "self.block_cache.get_or_trace(batch.draft_len)",
        ),
        _Frame(
            f"{USER}/dflash/block_cache.py", 64, "get_or_trace",
            "gm = torch.fx.symbolic_trace(self.drafter, concrete_args={\"draft_len\": draft_len})",
            "torch.fx.symbolic_trace(self.drafter, concrete_args={\"draft_len\": draft_len})",
        ),
        _Frame(
            f"{TORCH}/fx/_symbolic_trace.py", 1417, "symbolic_trace",
            "graph = tracer.trace(root, concrete_args)", "tracer.trace(root, concrete_args)",
        ),
        _Frame(f"{TORCH}/_dynamo/eval_frame.py", 1446, "_fn", "return fn(*args, **kwargs)", "fn(*args, **kwargs)"),
        _Frame(f"{TORCH}/fx/_symbolic_trace.py", 914, "trace", "(self.create_arg(fn(*args)),),", "fn(*args)"),
        _Frame(
            f"{USER}/dflash/drafter.py", 142, "forward",
            "hidden = layer(hidden, target_ctx, draft_len=draft_len)",
            "layer(hidden, target_ctx, draft_len=draft_len)",
        ),
        _Frame(
            f"{TORCH}/_dynamo/eval_frame.py", 511, "__call__",
            "return super().__call__(*args, **kwargs)", "super().__call__(*args, **kwargs)",
        ),
        _Frame(
            f"{TORCH}/fx/_symbolic_trace.py", 888, "module_call_wrapper",
            "return self.call_module(mod, forward, args, kwargs)",
            "self.call_module(mod, forward, args, kwargs)",
        ),
        _Frame(
            f"{TORCH}/fx/_symbolic_trace.py", 577, "call_module",
            "ret_val = forward(*args, **kwargs)", "forward(*args, **kwargs)",
        ),
        _Frame(
            f"{TORCH}/fx/_symbolic_trace.py", 881, "forward",
            "return _orig_module_call(mod, *args, **kwargs)", "_orig_module_call(mod, *args, **kwargs)",
        ),
        _Frame(
            f"{TORCH}/nn/modules/module.py", 1778, "_wrapped_call_impl",
            "return self._call_impl(*args, **kwargs)", "self._call_impl(*args, **kwargs)",
        ),
        _Frame(
            f"{TORCH}/nn/modules/module.py", 1789, "_call_impl",
            "return forward_call(*args, **kwargs)", "forward_call(*args, **kwargs)",
        ),
        _Frame(f"{TORCH}/_dynamo/eval_frame.py", 1120, "compile_wrapper", "raise RuntimeError("),
    )


def render(thread: str = "drafter-0") -> list[str]:
    """The lines (without newlines) Python prints when the thread dies."""
    lines = [f"Exception in thread {thread}:", "Traceback (most recent call last):"]
    for f in _frames():
        lines.append(f'  File "{f.file}", line {f.line}, in {f.function}')
        lines.append(f"    {f.code}")
        if f.underline is not None:
            col = f.code.index(f.underline)
            lines.append(" " * (4 + col) + "^" * len(f.underline))
    lines.append(f"RuntimeError: {MESSAGE}")
    return lines
