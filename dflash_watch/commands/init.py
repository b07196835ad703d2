"""`dflash-watch init [PATH]`: write a commented config file."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import fail


def run(args: argparse.Namespace) -> int:
    from ..config import example_config

    path = Path(args.path)
    if path.exists() and not args.force:
        return fail(f"{path} exists; pass --force to overwrite it")
    try:
        path.write_text(example_config(), encoding="utf-8")
    except OSError as exc:
        return fail(f"cannot write {path}: {exc.strerror or exc}")
    print(f"wrote {path}; edit [run].command and logs, then run `dflash-watch watch`")
    return 0
