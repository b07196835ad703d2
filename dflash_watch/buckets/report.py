"""A ``BucketPlan`` as text for a person, or as CONTRACTS section 8 JSON.

The JSON keeps the contract's keys (``boundaries``, ``padding_efficiency``,
``samples``, ``compare``, ``batched``) and adds only new ones, so scripts
written against section 8 keep working.
"""

from __future__ import annotations

import json
from typing import Any

from .batching import SEED, Batched
from .plan import BucketPlan, Layout


def to_json(plan: BucketPlan) -> str:
    return json.dumps(to_dict(plan))


def to_dict(plan: BucketPlan) -> dict[str, Any]:
    out: dict[str, Any] = {
        "boundaries": list(plan.optimal.boundaries),
        "padding_efficiency": round(plan.optimal.efficiency, 6),
        "samples": plan.samples,
        "kept": plan.kept,
        "left_out": {"over_max_len": plan.over_max_len, "empty": plan.empty},
        "k": plan.k,
        "buckets": len(plan.optimal.buckets),
        "max_len": plan.max_len,
        "tokens": plan.optimal.tokens,
        "padded_tokens": plan.optimal.padded_tokens,
        "per_bucket": _per_bucket(plan.optimal),
    }
    if plan.token_budget is not None:
        out["token_budget"] = plan.token_budget
        _add_batched(out, plan.optimal.batched)
    if plan.compare is not None:
        c = plan.compare
        cmp: dict[str, Any] = {
            "boundaries": list(c.boundaries),
            # null, not a perfect 1.0, when no sample lies at or below its last boundary
            "padding_efficiency": round(c.efficiency, 6) if c.samples else None,
            "samples": c.samples,
            "left_out": {"over_last_boundary": c.left_out},
            "tokens": c.tokens,
            "padded_tokens": c.padded_tokens,
            "per_bucket": _per_bucket(c),
        }
        _add_batched(cmp, c.batched)
        out["compare"] = cmp
    return out


def _per_bucket(lay: Layout) -> list[dict[str, Any]]:
    total = lay.samples or 1
    return [
        {"lower": b.lower, "upper": b.upper, "samples": b.samples, "share": round(b.samples / total, 6),
         "tokens": b.tokens, "padded_tokens": b.padded_tokens, "padding_efficiency": round(b.efficiency, 6)}
        for b in lay.buckets
    ]


def _add_batched(out: dict[str, Any], batched: Batched | None) -> None:
    if batched is None:
        return
    out["batched"] = round(batched.efficiency, 6)
    out["batches"] = {"count": batched.batches, "padded_tokens": batched.padded_tokens,
                      "over_budget": batched.over_budget}


# --- text -----------------------------------------------------------------

def to_text(plan: BucketPlan) -> str:
    opt = plan.optimal
    lines = [f"{plan.source}: {plan.samples:,} samples; {plan.kept:,} bucketed, {_tok(opt.tokens)} tokens, "
             f"longest {opt.boundaries[-1]:,}"]
    if plan.over_max_len:
        lines.append(f"left out: {plan.over_max_len:,} longer than --max-len {plan.max_len:,}")
    if plan.empty:
        lines.append(f"left out: {plan.empty:,} of length 0 (in no bucket)")
    got = len(opt.buckets)
    head = f"optimal boundaries, K={got}: {_join(opt.boundaries)}"
    if got < plan.k:
        head += f"  (asked for {plan.k}; the lengths have only {got} distinct values: every bucket is exact)"
    lines += ["", head,
              f"padding efficiency: {_pct(opt.efficiency)}  "
              f"(real {_tok(opt.tokens)} / padded {_tok(opt.padded_tokens)} tokens)"]
    if plan.compare is None:
        lines += ["", *_table(opt)]
    else:
        cmp = plan.compare
        lines += [f"compare boundaries:  {_join(cmp.boundaries)}",
                  f"compare efficiency: {_pct(cmp.efficiency)}  "
                  f"(real {_tok(cmp.tokens)} / padded {_tok(cmp.padded_tokens)} tokens)"]
        if not cmp.samples:
            lines[-1] = f"compare efficiency: -  (no sample is at or below its last boundary {cmp.boundaries[-1]:,})"
        else:
            if cmp.left_out:
                lines.append(f"compare leaves out {cmp.left_out:,} samples above its last boundary "
                             f"{cmp.boundaries[-1]:,}: its figures are over the other {cmp.samples:,}")
            lines.append(_saved(opt, cmp))
        lines += ["", *_side_by_side(opt, cmp)]
    if plan.token_budget is not None:
        lines += ["", f"batches of at most {plan.token_budget:,} tokens, padded to their longest sample "
                  f"(each bucket shuffled, seed {SEED}, then filled in turn):"]
        lines.append(_batched_line("optimal", opt.batched))
        if plan.compare is not None:
            lines.append(_batched_line("compare", plan.compare.batched))
    return "\n".join(lines)


def _saved(opt: Layout, cmp: Layout) -> str:
    if cmp.left_out:
        # The two cover different samples: compare them on what compare covers.
        return (f"padded tokens per real token: optimal {1 / opt.efficiency:.4f}, "
                f"compare {1 / cmp.efficiency:.4f}")
    diff = cmp.padded_tokens - opt.padded_tokens
    share = diff / cmp.padded_tokens if cmp.padded_tokens else 0.0
    return f"optimal pads {_tok(diff)} fewer tokens ({share:.1%} of the compare's padded tokens)"


def _batched_line(name: str, b: Batched | None) -> str:
    if b is None:
        return f"  {name}: -"
    line = f"  {name}: {_pct(b.efficiency)} in {b.batches:,} batches (padded {_tok(b.padded_tokens)} tokens)"
    if b.over_budget:
        line += f"; {b.over_budget:,} samples longer than the budget, one per batch"
    return line


def _table(lay: Layout) -> list[str]:
    total = lay.samples or 1
    rows = [f"{'bucket':>17}  {'samples':>11}  {'share':>6}  {'padded tok':>10}  {'efficiency':>10}"]
    for b in lay.buckets:
        rows.append(f"{_range(b.lower, b.upper):>17}  {b.samples:>11,}  {b.samples / total:>6.1%}  "
                    f"{_tok(b.padded_tokens):>10}  {_pct(b.efficiency):>10}")
    return rows


def _side_by_side(opt: Layout, cmp: Layout) -> list[str]:
    def cells(lay: Layout, i: int) -> str:
        if i >= len(lay.buckets):
            return f"{'':>17}  {'':>11}  {'':>6}  {'':>7}"
        b = lay.buckets[i]
        total = lay.samples or 1
        return f"{_range(b.lower, b.upper):>17}  {b.samples:>11,}  {b.samples / total:>6.1%}  {_pct(b.efficiency):>7}"

    head = f"{'bucket':>17}  {'samples':>11}  {'share':>6}  {'eff':>7}"
    rows = [f"{'optimal':<47}  |  compare", f"{head}  |  {head}"]
    for i in range(max(len(opt.buckets), len(cmp.buckets))):
        rows.append(f"{cells(opt, i)}  |  {cells(cmp, i)}".rstrip())
    return rows


def _range(lo: int, hi: int) -> str:
    return f"({lo:,}, {hi:,}]"


def _join(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def _pct(x: float) -> str:
    return f"{x:.2%}"


def _tok(n: int) -> str:
    """Token counts as a person reads them: 1.23 G, 45.6 M, 789 K, 512."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return str(n)
