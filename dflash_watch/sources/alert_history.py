"""The alert history file: every alert as one JSON line (CONTRACTS section 2).

Appended as alerts happen so that `tail -f`, a log shipper or `jq` can
follow it; a write that fails is said once and never stops the watch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from detectors.base import Alert


class AlertHistory:
    def __init__(self, path: str, on_notice: Callable[[str], None] | None = None) -> None:
        self.path = Path(path).expanduser()
        self._on_notice = on_notice
        self._failed = False
        self.written = 0

    def write(self, alert: Alert) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(alert.to_json() + "\n")
            self.written += 1
            self._failed = False
        except OSError as exc:
            if not self._failed and self._on_notice is not None:
                self._on_notice(f"cannot write the alert history {self.path}: {exc.strerror or exc}")
            self._failed = True
