"""The inductor/triton compile cache: its size and entry count.

A cold cache explains slow first steps (every graph compiles again), so
its size is part of the fingerprint. The walk is bounded by a file cap and
a time cap: a cache of millions of files on a network disk must not hold
up ``baseline save``; a capped walk says so (``complete: false``).
"""

from __future__ import annotations

import os
import pwd
import time

from .model import CompileCache

MAX_ENTRIES = 200_000
MAX_SECONDS = 2.0


def default_cache_dir(env: dict[str, str] | None, uid: int | None = None) -> str:
    """``TORCHINDUCTOR_CACHE_DIR`` of the run, else inductor's default
    ``/tmp/torchinductor_<user>``."""
    if env and env.get("TORCHINDUCTOR_CACHE_DIR"):
        return env["TORCHINDUCTOR_CACHE_DIR"]
    try:
        user = pwd.getpwuid(os.getuid() if uid is None else uid).pw_name
    except KeyError:
        user = str(os.getuid() if uid is None else uid)
    return f"/tmp/torchinductor_{user}"


def cache_size(path: str, max_entries: int = MAX_ENTRIES, max_seconds: float = MAX_SECONDS) -> CompileCache:
    """Bytes and entries (files and directories) under ``path``; a missing
    directory is a cache of 0 bytes (cold), not an error. Links are not followed."""
    total = entries = 0
    deadline = time.monotonic() + max_seconds
    todo = [path]
    complete = True
    while todo:
        directory = todo.pop()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    entries += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
                    if entries >= max_entries or (entries % 1024 == 0 and time.monotonic() > deadline):
                        complete = False
                        break
        except OSError:
            continue
        if not complete:
            break
    return CompileCache(path, total, entries, complete)
