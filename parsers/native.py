"""The compiled kernels (``parsers/_native.c``), where they were built.

Issue 20 allows a compiled part on two conditions: an install without a C
compiler still works, and gives the same alerts. So the kernels are
optional (setup.py builds them with ``optional=True``), each caller keeps
its Python loop, and a kernel takes over only the common case and hands
anything else back unchanged. ``KERNELS`` is the module, or None where it
was not built, was built for another ABI (an editable install's stale
build), or ``DFLASH_WATCH_PURE=1`` asks for the Python loops. The
differential tests run both in one process (tests/core/test_native.py,
tests/shell/test_fast_path_equivalence.py); CI also runs them with the
variable set, and builds a wheel with no compiler.

Why C and not more Python: these are the loops left per line and per step
once everything around them runs as ``map`` over columns in C; in the
interpreter each costs a few tenths of a microsecond per line.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from .cursor import Bare, Lane, Ranked, Redrawn

# The C module's ``ABI`` this Python expects (``parsers/_native.c``).
ABI = 28
PURE_ENV = "DFLASH_WATCH_PURE"


class Kernels(Protocol):
    """``parsers/_native.c``: each function's comment there says what it does."""

    ABI: int

    def take_run(
        self, view: str, text: str, ends: list[int], k: int, pos: int, flag_cache: dict[bytes, tuple[int, Lane | Bare | Ranked | Redrawn | None]],
        run_lines: list[str], run_starts: list[int], run_ends: list[int], run_lanes: list[Lane | Bare | Ranked | Redrawn | bytes],
        wide: bool, has_cr: bool, fast: bool, shape_max: int, progress_flag: int,
        glued_at: Callable[[str], int], /,
    ) -> tuple[int, int]: ...

    def slide_median(self, window: list[float], leaving: list[float], values: list[float], odd: bool, /) -> list[float]:
        ...

    def last_minute(self, text: str, lo: int, hi: int, key: str, base: float, frac_len: int, /) -> float | None:
        ...

    def fold_buckets(
        self, times: list[float], values: list[float], width: float, key: float, o_t: float, o_min: float,
        o_max: float, o_sum: float, o_n: int, /,
    ) -> tuple[list[float], float, float, float, float, float, int] | None: ...

    def line_numbers(self, view: str, pos: int, number: int, starts: list[int], /) -> list[int] | None: ...

    def in_order(
        self, i: int, lanes: list[Any], made: dict[int, tuple[Any, ...]], lines: list[str], starts: list[int],
        ends: list[int], events: list[Any], state: list[Any], text: str, fallback: float,
        latest: Callable[[str, int, int], float | None], minute_for: Callable[[int], tuple[str, float] | None],
        minute_entered: Callable[[], None], stamped: Callable[[], None] | None,
        unstamped: Callable[[float, int | None, float | None], tuple[float, bool]] | None, jitter: float,
        clocks: tuple[Any, Any, float, float] | None = None, /,
    ) -> int: ...

    def rank_numbers(self, lines: list[str], i: int, prefixes: list[Ranked], /) -> list[int] | None: ...

    def columns(self, steps: list[Any], which: tuple[int, ...], /) -> tuple[list[Any], ...] | None: ...

    def window_swap(self, window: list[float], leaving: float, value: float, /) -> float | None: ...

    def ascii_view(self, text: str, /) -> str: ...

    def ascii_bytes(self, text: str, /) -> memoryview: ...

    def newlines(self, data: bytes | bytearray, /) -> int: ...

    def utf8_text(self, data: bytes | bytearray, /) -> str | None: ...

    def match_end(self, id: int, start: int, end: int, flags: int, ends: list[int], /) -> None: ...

    def hung_pass(
        self, ranks: list[Any], floor: float, factor: float, now: float, /
    ) -> tuple[int, float, float | None, float] | None: ...

    def hung_floor(self, ranks: Iterable[Any], since: float, /) -> float | None: ...  # a list, tuple or dict values

    def margin_walk(
        self, points: list[tuple[float, float]], times: list[float], smoothed: list[float], span: float,
        margin: float, lasts: float, least: int, since: float | None, count: int, /,
    ) -> Any: ...

    def stream_tails(
        self, pending: list[Any], ranks: list[int | None], streams: dict[int | None, Any], cut: int, keep: int, /,
    ) -> bool | None: ...

    def set_rank_state(
        self, cls: type, names: tuple[str, ...], deque_type: type, kept: int,
        slid: Callable[[list[float], float, float], float], interval: Callable[..., None], /,
    ) -> None: ...

    def rank_steps(
        self, ranks: dict[int, Any], steps: list[Any], fields: tuple[int, ...], window_s: float,
        new_rank: Callable[[int, float], Any], rank_of_source: Callable[[str], int | None], /,
    ) -> tuple[int, bool, bool]: ...

    def sources(self, prefix: str, numbers: list[int], lo: int, hi: int, picks: list[bool] | None, /) -> list[str] | None:
        ...

    def lane_groups(
        self, lines: list[str], lanes: list[Lane | Bare | bytes], /,
    ) -> dict[int, tuple[Lane | Bare, list[str], list[bool]]] | None: ...

    def fresh_series(
        self, steps: list[int | None], times: list[float], ranks: list[int | None], bars: list[bool],
        known0: dict[int, list[float]], known1: dict[int, list[float]], /,
    ) -> tuple[list[int], list[float], list[int], list[float]] | None: ...

    def metric_names(self, metrics: list[Any], /) -> set[str] | None: ...

    def stall_walk(
        self, steps: list[Any], fields: tuple[int, ...], bound: float, floor: float, dup_s: float, watching: bool,
        last_step: int | None, last_t: float | None, last_total: int | None, rank0: int | None,
        step_seconds: float | None, bars: int, /,
    ) -> Any: ...

    def set_progress(
        self, cls: type, names: tuple[str, ...], descriptors: tuple[object, ...], defaults: tuple[object, ...],
        required: int, /,
    ) -> None: ...

    def build_progress(self, *args: object, **kwargs: object) -> object:
        ...

    def cut_numbers(self, lines: list[str], start: int, stop: int, ints: bool, /) -> list[int] | list[float] | None:
        ...

    def minute_stamps(
        self, lines: list[str], i: int, key: str, base: float, frac_len: int, out: list[float], /,
    ) -> int: ...

    def series_tops(
        self, steps: list[int | None], gaps: list[float], series: list[bool], tops: list[int | None],
        silence: float, jitter: float, /,
    ) -> int: ...


def pure_asked() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def _load() -> Kernels | None:
    if pure_asked():
        return None
    try:
        module = importlib.import_module("._native", __package__)
    except ImportError:
        return None
    return cast(Kernels, module) if getattr(module, "ABI", None) == ABI else None


KERNELS: Kernels | None = _load()


def status() -> str:
    """Which path runs, in a few words (CI prints it; ``test_native_build`` reads it)."""
    if KERNELS is not None:
        return "compiled kernels"
    if pure_asked():
        return f"pure Python ({PURE_ENV} set)"
    return "pure Python (compiled kernels not built)"
