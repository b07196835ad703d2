"""The training probe: runs inside the training process, writes probe lines.

Stdlib only at import (torch is read from ``sys.modules`` when the loop
hands it tensors), so ``import dflash_watch.probe`` adds nothing to a
training process's start-up and pulls in none of the watcher. See
``Probe`` for the two-line use, ``hf.DflashProbeCallback`` for the Hugging
Face Trainer and ``lightning.DflashProbeCallback`` for Lightning.
"""

from .probe import ENV_DIR, Probe, default_path
from .writer import ProbeWriter

__all__ = ["ENV_DIR", "Probe", "ProbeWriter", "default_path"]
