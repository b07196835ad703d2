"""Where a Python environment keeps its packages, found from the outside.

A venv's ``bin/python`` is a symlink to the base interpreter, so
``/proc/PID/exe`` names the base (``/usr/bin/python3.11``) and loses the
venv. The venv is found instead from ``argv[0]`` when it is a path (what a
venv's scripts, torchrun's children and most launchers use), from a
``site-packages`` directory mapped into the process (torch's shared
libraries), or else from the interpreter's own ``sys.prefix`` layout.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...procfs import proc_exe, proc_maps
from .model import FingerprintError

_LIB_PYTHON = re.compile(r"^python(\d+\.\d+)t?$")


@dataclass(frozen=True, slots=True)
class PythonEnv:
    """An interpreter's prefix, its version ("3.11.7" or "3.11") and its
    package directories, the environment's own first."""

    prefix: Path
    python: str | None
    site_packages: tuple[Path, ...]


def _read_cfg(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _site_dirs(prefix: Path) -> list[Path]:
    """``lib/pythonX.Y/site-packages`` (and Debian's ``dist-packages``) under ``prefix``."""
    out: list[Path] = []
    seen: set[Path] = set()
    for lib in ("lib", "lib64"):  # lib64 is often a link to lib: each directory once
        base = prefix / lib
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            if _LIB_PYTHON.match(name):
                for leaf in ("site-packages", "dist-packages"):
                    d = base / name / leaf
                    if d.is_dir() and d.resolve() not in seen:
                        seen.add(d.resolve())
                        out.append(d)
    # Debian's system Python: pip's /usr/local first, then the distribution's.
    if prefix == Path("/usr"):
        for d in _site_dirs(Path("/usr/local")):
            if d.resolve() not in seen:
                seen.add(d.resolve())
                out.insert(0, d)
    d = prefix / "lib" / "python3" / "dist-packages"
    if d.is_dir() and d.resolve() not in seen:
        out.append(d)
    return out


def _version_of(site: list[Path]) -> str | None:
    for d in site:
        m = _LIB_PYTHON.match(d.parent.name)
        if m:
            return m.group(1)
    return None


def env_of_prefix(prefix: Path) -> PythonEnv:
    """A venv (``pyvenv.cfg`` in ``prefix``) or a plain installation."""
    cfg = _read_cfg(prefix / "pyvenv.cfg")
    site = _site_dirs(prefix)
    python = cfg.get("version_info") or cfg.get("version") or _version_of(site)
    if cfg and cfg.get("include-system-site-packages", "false").lower() == "true" and cfg.get("home"):
        base = Path(cfg["home"]).parent  # home is the base interpreter's bin/
        site += [d for d in _site_dirs(base) if d not in site]
    return PythonEnv(prefix, python, tuple(site))


def env_of_path(path: str | os.PathLike[str]) -> PythonEnv:
    """``--env``: a venv directory, an installation prefix, or its python."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FingerprintError(f"--env {path}: not a directory (the run's virtual environment) nor its python")
    if p.is_dir():
        prefix = p
    elif p.parent.name in ("bin", "Scripts"):
        prefix = p.parent.parent  # not resolved: a venv's python is a symlink out of it
    else:
        raise FingerprintError(f"--env {path}: not a virtual environment nor its bin/python")
    env = env_of_prefix(prefix.absolute())
    if not env.site_packages:
        raise FingerprintError(f"--env {path}: no lib/pythonX.Y/site-packages under {prefix}")
    return env


def _prefix_of_executable(path: Path) -> Path | None:
    """The prefix of ``.../bin/python*``: its venv when ``pyvenv.cfg`` is beside ``bin/``."""
    if path.parent.name != "bin":
        return None
    prefix = path.parent.parent
    if (prefix / "pyvenv.cfg").is_file() or _site_dirs(prefix):
        return prefix
    return None


def _mapped_site_packages(pid: int) -> Path | None:
    """A ``site-packages`` directory a shared library of the process lives in."""
    for line in proc_maps(pid):
        at = line.find("/site-packages/")
        if at < 0:
            continue
        start = line.find(" /") + 1  # the path column, after the inode
        if 0 < start <= at:
            return Path(line[start:at + len("/site-packages")])
    return None


def env_of_pid(pid: int, argv: tuple[str, ...], cwd: str | None) -> PythonEnv:
    """The Python environment process ``pid`` runs in."""
    if argv and "/" in argv[0] and "python" in os.path.basename(argv[0]):
        exe = Path(argv[0]) if os.path.isabs(argv[0]) or cwd is None else Path(cwd) / argv[0]
        prefix = _prefix_of_executable(Path(os.path.normpath(exe)))
        if prefix is not None:
            return env_of_prefix(prefix)
    site = _mapped_site_packages(pid)
    if site is not None and site.parent.parent.parent.is_dir():
        return env_of_prefix(site.parent.parent.parent)  # <prefix>/lib/pythonX.Y/site-packages
    try:
        exe = Path(proc_exe(pid))
    except OSError as exc:
        raise FingerprintError(f"process {pid}: cannot read its executable ({exc.strerror or exc})") from None
    prefix = _prefix_of_executable(exe)
    if prefix is None:
        raise FingerprintError(f"process {pid} ({exe.name}) is not a Python interpreter in a known layout")
    return env_of_prefix(prefix)
