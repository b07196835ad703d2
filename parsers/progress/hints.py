"""A run whose progress never reaches its log, said once.

Lightning's default progress bar, ``RichProgressBar`` (the default when
``rich`` is installed), draws on a terminal only: with the log written to a
file or a pipe (``python train.py 2>&1 | tee train.log``) it writes nothing
until the run ends, so throughput and stalls cannot be judged, and the
watcher looks as if it saw a healthy run. Lightning is known by the banner
it prints at ``fit`` (``GPU available: ...``, ``LOCAL_RANK: ...``, its
model summary's size line, ``Trainer.fit` stopped``); when no progress
followed it for a while, the fix is said once.

>>> hint = SilentBarHint()
>>> hint.look("GPU available: False, used: False\\n")
>>> hint.due(100.0, 60.0), hint.due(130.0, 60.0), hint.due(160.0, 60.0) is not None
(None, None, True)
>>> hint.due(999.0, 60.0) is None  # said once
True
"""

from __future__ import annotations

__all__ = ["LIGHTNING", "LIGHTNING_HINT", "SilentBarHint"]

# Lines only Lightning prints (rank_zero_info at ``Trainer(...)`` and
# ``fit``), each known by all of its parts (a script's own
# ``print("GPU available:", ...)`` is not Lightning's banner).
LIGHTNING: tuple[tuple[str, ...], ...] = (
    ("GPU available: ", ", used: "),
    ("LOCAL_RANK: ", " - CUDA_VISIBLE_DEVICES: "),
    ("Total estimated model params size (MB)",),
    ("`Trainer.fit` stopped",),
)

LIGHTNING_HINT = (
    "this log is a Lightning run's and shows no progress: Lightning's default progress bar "
    "(RichProgressBar) writes nothing to a file or pipe, so throughput and stalls cannot be judged; "
    "add lightning.pytorch.callbacks.TQDMProgressBar() to the Trainer's callbacks, or the probe's "
    "callback (dflash_watch.probe.lightning.DflashProbeCallback)"
)


class SilentBarHint:
    """One log's watch for a framework whose bar leaves nothing in the file.

    ``look`` is given the log's text until Lightning is seen (a few
    substring tests per chunk, and none once it was seen or progress came);
    ``due(now, after_s)`` is asked as the clock moves and answers the hint
    once, ``after_s`` after it first asked with Lightning seen (on the
    asker's clock, never on the log's stamps); ``progressed`` retires it.
    """

    __slots__ = ("done", "framework", "since")

    def __init__(self) -> None:
        self.framework: str | None = None
        self.since: float | None = None
        self.done = False

    def look(self, text: str) -> None:
        if self.framework is None and not self.done and any(
            all(part in text for part in parts) for parts in LIGHTNING
        ):
            self.framework = "lightning"

    def progressed(self) -> None:
        """Progress came: the bar does reach the log (or a probe reports it)."""
        self.done = True

    def due(self, now: float, after_s: float) -> str | None:
        if self.done or self.framework is None:
            return None
        if self.since is None:
            self.since = now
        if now - self.since < after_s:
            return None
        self.done = True
        return LIGHTNING_HINT
