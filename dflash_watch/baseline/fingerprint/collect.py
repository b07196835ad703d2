"""A fingerprint from a live process or from a venv on disk."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ...procfs import proc_cmdline, proc_cwd, proc_exe, proc_uid
from .cache import cache_size, default_cache_dir
from .model import Fingerprint, FingerprintError
from .packages import package_versions, torch_build
from .process import file_hashes, proc_training_env
from .site import PythonEnv, env_of_path, env_of_pid


def _of(where: PythonEnv, **rest: object) -> Fingerprint:
    build = torch_build(where.site_packages)
    torch, cuda, git = build if build is not None else (None, None, None)
    return Fingerprint(
        python=where.python, torch=torch, torch_git=git, cuda=cuda,
        packages=package_versions(where.site_packages),
        site_packages=[str(d) for d in where.site_packages],
        **rest,  # type: ignore[arg-type]
    )


def fingerprint_of_env(path: str | os.PathLike[str], cache_dir: str | None = None) -> Fingerprint:
    """``--env VENV`` (a venv directory or its python): packages, Python and
    torch; no process, so no environment variables, files or launch command.
    The compile cache is ``cache_dir`` when given (the caller's
    ``TORCHINDUCTOR_CACHE_DIR``), else inductor's default for this user."""
    env = env_of_path(path)
    cache = cache_size(cache_dir or default_cache_dir(None))
    return _of(env, compile_cache=cache)


def fingerprint_of_pid(pid: int) -> Fingerprint:
    """The running training process ``pid``: its interpreter's packages,
    its training variables, launch command, script/config hashes, cache."""
    argv = proc_cmdline(pid)
    if not argv:
        raise FingerprintError(f"process {pid} is gone or not readable")
    cwd = proc_cwd(pid)
    env = env_of_pid(pid, argv, cwd)
    variables = proc_training_env(pid)
    cache = cache_size(default_cache_dir(variables, proc_uid(pid)))
    return _of(env, env=variables, files=file_hashes(argv, cwd), launch_args=list(argv), compile_cache=cache)


def training_pid(pids: Iterable[int]) -> int | None:
    """The training process among a job's process tree (root first): the
    first Python interpreter (torchrun's launcher runs in the same venv as
    its ranks and carries the script and configs on its command line)."""
    for pid in pids:
        try:
            exe = os.path.basename(proc_exe(pid))
        except OSError:
            continue
        argv = proc_cmdline(pid)
        if argv and any(a.endswith(_WRAPPER) for a in argv[:4]):
            continue  # dflash-watch's own pane wrapper runs in dflash-watch's Python, not the job's
        if exe.startswith("python") or (argv and Path(argv[0]).name.startswith("python")):
            return pid
    return None


_WRAPPER = os.path.join("dflash_watch", "control", "wrapper.py")
