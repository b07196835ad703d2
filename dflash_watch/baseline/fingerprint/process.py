"""What a training process was started with, read from its ``/proc``:
the environment variables that change training, the launch command, and
the hashes of the script and config files named on it.

``/proc/PID/environ`` holds the job's secrets too (tokens, webhook URLs):
only the names below are ever read out of it, the rest is dropped unread.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ...procfs import proc_environ_entries

# Variables that change what training does or how fast it goes.
ENV_NAMES = frozenset({"PYTORCH_CUDA_ALLOC_CONF", "TORCHINDUCTOR_CACHE_DIR", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"})
ENV_PREFIXES = ("NCCL_", "TORCH_")
# Even under those prefixes, a name that looks like a credential is never kept.
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "AUTH", "CREDENTIAL", "COOKIE")

FILE_SUFFIXES = frozenset({".py", ".json", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".sh"})
FILE_CAP_BYTES = 16 * 1024 * 1024
MAX_FILES = 32


def training_env_var(name: str) -> bool:
    """True for a variable the fingerprint keeps."""
    if any(word in name for word in _SECRET_WORDS):
        return False
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)


def proc_training_env(pid: int) -> dict[str, str] | None:
    """The training variables of process ``pid`` as it was started; None
    when its environment is not ours to read."""
    entries = proc_environ_entries(pid)
    return None if entries is None else filter_env(entries)


def filter_env(entries: list[bytes]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition(b"=")
        if not sep:
            continue
        key = name.decode("utf-8", "replace")
        if training_env_var(key):
            out[key] = value.decode("utf-8", "replace")
    return out


def file_hashes(argv: tuple[str, ...] | list[str], cwd: str | None) -> dict[str, str]:
    """sha256 of each script or config named in ``argv`` (``train.py``,
    ``--config cfg.yaml``, ``--config=cfg.yaml``), keyed by the name as
    written: the same run started from another directory keeps its keys.
    Only existing regular files with a known suffix and under the size cap."""
    out: dict[str, str] = {}
    for arg in argv[1:]:
        name = arg.partition("=")[2] if arg.startswith("-") else arg
        if not name or Path(name).suffix.lower() not in FILE_SUFFIXES or name in out:
            continue
        path = Path(name) if os.path.isabs(name) or cwd is None else Path(cwd) / name
        digest = _sha256(path)
        if digest is not None:
            out[name] = digest
            if len(out) >= MAX_FILES:
                break
    return out


def _sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > FILE_CAP_BYTES:
                return None
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None
