"""`dflash-watch buckets LENGTHS`: boundaries that minimise padding (CONTRACTS section 8).

numpy (and torch, for ``.pt`` only) is imported here, when the command
runs, never by ``dflash-watch --help``.
"""

from __future__ import annotations

import argparse
import sys

from . import fail


def run(args: argparse.Namespace) -> int:
    if args.k < 1:
        return fail(f"--k {args.k}: needs at least 1 bucket")
    if args.max_len is not None and args.max_len < 1:
        return fail(f"--max-len {args.max_len}: must be >= 1")
    if args.token_budget is not None and args.token_budget < 1:
        return fail(f"--token-budget {args.token_budget}: must be >= 1")
    from ..buckets.plan import parse_boundaries

    compare = None
    if args.compare is not None:
        try:
            compare = parse_boundaries(args.compare)
        except ValueError as exc:
            return fail(str(exc))

    from ..buckets.lengths import LengthsError, read_lengths
    from ..buckets.optimal import TooLarge
    from ..buckets.plan import make_plan
    from ..buckets.report import to_json, to_text

    try:
        lengths = read_lengths(args.lengths, getattr(args, "field", None))
    except LengthsError as exc:
        return fail(str(exc))
    try:
        plan = make_plan(lengths, args.k, source=_show(args.lengths), max_len=args.max_len, compare=compare,
                         token_budget=args.token_budget)
    except TooLarge as exc:
        return fail(f"{_show(args.lengths)}: {exc}")
    if plan.kept == 0:
        why = f"longer than --max-len {args.max_len}" if plan.over_max_len else "of length 0"
        return fail(f"{_show(args.lengths)}: no lengths left to bucket: all {plan.samples:,} are {why}"
                    if not (plan.over_max_len and plan.empty) else
                    f"{_show(args.lengths)}: no lengths left to bucket ({plan.over_max_len:,} longer than "
                    f"--max-len, {plan.empty:,} of length 0)")
    sys.stdout.write((to_json(plan) if args.json else to_text(plan)) + "\n")
    return 0


def _show(path: str) -> str:
    return path if path.isprintable() else ascii(path)
