"""Log text shared by the tests of what outlives a fault (history, outputs).

One home for the step line, the ranked OOM traceback and the quiet config,
so that the e2e kill test and the output-fault tests read the same run.
"""

from __future__ import annotations

STEP = "2026-11-29 10:{m:02d}:{s:02d},000 - INFO - dflash.train - step {n}/1000 | loss 2.31 | 21.5 Ktok/s\n"
TRACEBACK = (
    "[rank{r}]: Traceback (most recent call last):\n"
    '[rank{r}]:   File "/opt/dflash/train.py", line 412, in <module>\n'
    "[rank{r}]:     main()\n"
    '[rank{r}]:   File "/opt/dflash/trial{t}.py", line {t}, in step_{t}\n'
    "[rank{r}]:     loss = model(batch)\n"
    "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {t}.00 GiB.\n"
)
# The log is days old on the wall clock: the stall detector is told to wait
# longer than any test runs, so the crashes are the only alerts.
QUIET = "[detectors]\nstall_min_s = 1e6\nstall_first_s = 1e6\n"
