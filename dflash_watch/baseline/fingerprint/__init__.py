"""The environment fingerprint of a training run (issue 11, "what changed").

What a run's outcome depends on besides its code: the interpreter, torch
and its CUDA build, every package's version, the environment variables that
change training, the hashes of the script and configs on its command line,
and how warm the compile cache is. Read from the outside (``/proc`` of the
job's process, dist-info metadata, the cache directory), never by importing
the training environment: its torch may not even load here.

``fingerprint_of_pid`` for a live job, ``fingerprint_of_env`` for a venv
named with ``--env``; the command layer chooses which.
"""

from __future__ import annotations

from .collect import fingerprint_of_env, fingerprint_of_pid, training_pid
from .model import Fingerprint, FingerprintError

__all__ = ["Fingerprint", "FingerprintError", "fingerprint_of_env", "fingerprint_of_pid", "training_pid"]
