"""`dflash-watch status`: the tmux-managed training job, from scripts."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from ..control.cli_actions import cmd_status

    return cmd_status(args)
