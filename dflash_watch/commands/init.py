"""`dflash-watch init [PATH]`: write a commented config file.

After writing, it says where commands look for a config without
``--config`` (``config.default_config_paths``, first found wins), so a
file written elsewhere is not silently ignored.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import fail


def run(args: argparse.Namespace) -> int:
    from ..config import default_config_paths
    from ..config_template import example_config

    path = Path(args.path)
    if path.exists() and not args.force:
        return fail(f"{path} exists; pass --force to overwrite it")
    try:
        path.write_text(example_config(), encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write {path}: {exc.strerror or exc}")
    print(f"wrote {path}; edit [run].command and logs, then run `dflash-watch watch`")
    places = default_config_paths()
    if not any(_same(path, p) for p in places):
        print(f"commands read it with --config {path}; without --config they look in, first found wins: "
              + ", ".join(str(p) for p in places))
    return 0


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
