"""A RotatingFileHandler's rollovers by hand, for the rotation tests.

``.k`` -> ``.k+1`` from the oldest, the log -> ``.1``, a new log; each file
says its generation (``gen N``), every one written within one clock tick
(copies then tell apart by their numbers only). ``backup``: the copies kept
(the oldest pruned first, as ``backupCount``); None keeps them all.
"""

from __future__ import annotations

import os
from pathlib import Path

TICK_NS = 1_700_000_000_000_000_000  # every copy written within one clock tick


class Writer:
    def __init__(self, folder: Path, backup: int | None = None) -> None:
        self.log = folder / "train.log"
        self.gen = 0
        self.copies = 0
        self.backup = backup
        self._write()

    def _write(self) -> None:
        self.log.write_text(f"gen {self.gen}\n")
        os.utime(self.log, ns=(TICK_NS, TICK_NS))
        self.gen += 1

    def rollover(self) -> None:
        if self.backup is not None and self.copies >= self.backup:
            os.unlink(f"{self.log}.{self.copies}")
            self.copies -= 1
        for k in range(self.copies, 0, -1):
            os.rename(f"{self.log}.{k}", f"{self.log}.{k + 1}")
        os.rename(self.log, f"{self.log}.1")
        self.copies += 1
        self._write()
