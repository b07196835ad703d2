"""One module per subcommand, each with ``run(args) -> int``.

They are imported lazily by the CLI so that a command pays only for what
it uses (Textual for the dashboard, numpy for the detectors).
"""

from __future__ import annotations

import sys


def fail(message: str, code: int = 2) -> int:
    """One line on stderr, never a traceback."""
    sys.stderr.write(f"dflash-watch: {message}\n")
    return code
