"""`dflash-watch relaunch`: the tmux-managed training job, from scripts."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from ..control.cli_actions import cmd_relaunch

    return cmd_relaunch(args)
