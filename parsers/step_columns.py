"""A run of step lines read in columns: ``[p.<field> for p in steps]`` for
several fields in one pass.

The detectors prove a run of step lines quiet (``detectors.base.StepCommit``)
on its columns: the times, the steps, the ranks, the rates, the losses. Read
one comprehension at a time, a run costs a dozen passes of 10-20 ns a line,
a few percent of a progress-heavy replay (issue 20). Where the kernels are
built (``parsers.native``) the fields are read at their slots in one pass
of C (``columns`` in ``_native.c``); elsewhere, and for anything but a list
of ``Progress``, by one comprehension per field, written for the reader
at import as ``dataclasses`` writes an ``__init__`` (the same values either
way; ``attrgetter`` would cost twice a comprehension).

A reader names its fields once, at import (``columns_of``), and reads them
per run (``read``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from itertools import chain
from typing import Any

from .events import Progress
from .native import KERNELS

_AT = {f.name: i for i, f in enumerate(fields(Progress))}


@dataclass(frozen=True, slots=True)
class Columns:
    """The fields one reader takes: their places in ``Progress``'s fields
    (the kernel's), and the comprehensions that read them (Python's)."""

    at: tuple[int, ...]
    python: Callable[[Sequence[Progress]], tuple[list[Any], ...]]


def columns_of(*names: str) -> Columns:
    """The reader of ``names`` (a KeyError for a name that is no field)."""
    at = tuple(_AT[name] for name in names)  # (checks each name before it is written into code)
    body = ", ".join(f"[p.{name} for p in steps]" for name in names)
    namespace: dict[str, Any] = {}
    exec(f"def read(steps):\n    return ({body},)\n", namespace)
    return Columns(at, namespace["read"])


# The times of a run: the column most readers want (one home, one generated reader).
TIMES = columns_of("time")


def read(steps: Sequence[Progress], which: Columns) -> tuple[list[Any], ...]:
    """One list per field of ``which``, in its order: each the field of every
    step, in order."""
    if KERNELS is not None and type(steps) is list:
        got = KERNELS.columns(steps, which.at)
        if got is not None:
            return got
    return which.python(steps)


def metric_names(metrics: list[tuple[tuple[str, float], ...]]) -> set[str]:
    """The names among a run's metrics (its ``metrics`` column), each once:
    ``{m[0] for m in chain.from_iterable(metrics)}``, in C where built (the
    same set, added in the same order)."""
    if KERNELS is not None:
        names = KERNELS.metric_names(metrics)
        if names is not None:
            return names
    return {m[0] for m in chain.from_iterable(metrics)}
