"""A Python exception line is never a progress line, whatever step it names.

"RuntimeError: boom at step 10" was read as progress (a step, nothing
else): the newest progress at a crash, which the dashboard's header
passed over (it follows the training loop), so it stopped steps early.
Lines that only look like one (a tqdm bar's "Training:" description, a
field named Error) are still read.
"""

from __future__ import annotations

import pytest

from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.stream import LogStream


def _progress(line: str) -> list[Progress]:
    stream = LogStream("t.log")
    events = stream.feed(line + "\n", 1, 1000.0) + stream.flush(1000.0)
    return [e for e in events if isinstance(e, Progress)]


@pytest.mark.parametrize("line", [
    "RuntimeError: boom at step 10",
    "AssertionError: loss is nan at step 5",
    "torch.OutOfMemoryError: CUDA out of memory at step 3 (tok/s 21000)",
    "[rank0]: ValueError: bad shard at step 7/1000",
    "[default1]:[rank1]: KeyboardInterrupt: step 4",
    "  ZeroDivisionError: step 12 loss 2.0",
])
def test_exception_lines_are_no_progress(line: str) -> None:
    assert _progress(line) == []


@pytest.mark.parametrize(("line", "step"), [
    ("Training:  10%|#         | 10/100 [00:01<00:09, 9.50it/s]", 10),
    ("Error: 0.2 | step 4 | loss 2.1", 4),
    ("step 10/1000 | loss 2.300 | 21.5 Ktok/s", 10),
    ("[rank0]: step 7 | loss 2.0 | 1000 tok/s", 7),
])
def test_lines_that_only_look_like_one_are_still_progress(line: str, step: int) -> None:
    assert [p.step for p in _progress(line)] == [step]
