"""The compiled kernels (``parsers.native``) against the Python loops they replace.

Each kernel must give exactly what its Python loop gives, and hand back
untouched what it does not take (issue 20: a compiled part gives the same
alerts as the pure-Python fallback). Where the kernels were not built (no
compiler, ``DFLASH_WATCH_PURE=1``) these skip with the reason; the
fallback itself is what the rest of the suite runs then.
"""

from __future__ import annotations

import itertools
import math
import random
import types
from bisect import insort
from pathlib import Path

import pytest

from dflash_watch.detectors import loss_steps
from dflash_watch.parsers import native
from dflash_watch.parsers import stream as stream_module
from dflash_watch.parsers.glued import glued_at
from dflash_watch.parsers.stream import LogStream
from tests.random_logs import random_log, stream_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
needs_kernels = pytest.mark.skipif(native.KERNELS is None, reason=f"no compiled kernels: {native.status()}")


def _slide_reference(s: list[float], leaving: list[float], values: list[float], odd: bool) -> list[float]:
    """``loss_steps._smoothed``'s loop, as written there."""
    out: list[float] = []
    mid = len(s) // 2
    for old, value in zip(leaving, values):
        s.remove(old)
        insort(s, value)
        out.append(s[mid] if odd else 0.5 * (s[mid - 1] + s[mid]))
    return out


def _exact(values: list[float]) -> list[str]:
    return [repr(v) for v in values]  # -0.0 and 0.0 told apart


@needs_kernels
@pytest.mark.parametrize("seed", range(40))
def test_slide_median_is_the_python_loop(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.randrange(1, 14)
    pool = [0.0, -0.0, 1.5, 2.25, -3.0, 1e300, -1e300, 5e-324, 2.0, 2.0]
    draw = (lambda: rng.choice(pool)) if seed % 2 else (lambda: rng.uniform(-5, 5))
    held = [draw() for _ in range(size)]
    values = [draw() for _ in range(rng.randrange(0, 60))]
    leaving = [*held, *values][: len(values)]
    s_ref = sorted(held)
    s_nat = list(s_ref)
    want = _slide_reference(s_ref, leaving, values, size % 2 == 1)
    got = native.KERNELS.slide_median(s_nat, leaving, values, size % 2 == 1)  # type: ignore[union-attr]
    assert _exact(got) == _exact(want)
    assert _exact(s_nat) == _exact(s_ref)


@needs_kernels
@pytest.mark.parametrize(
    "values, leaving",
    [
        ([1.0, math.nan], [1.0, 2.0]),  # a NaN loss
        ([1.0, math.inf], [1.0, 2.0]),  # an infinite one
        ([1.0, 2], [1.0, 2.0]),  # an int, not a float
        ([1.0, 2.0], [1.0, 9.0]),  # a leaving value not in the window
    ],
)
def test_slide_median_refuses_and_leaves_the_window(values: list[float], leaving: list[float]) -> None:
    window = [1.0, 2.0, 3.0]
    with pytest.raises(ValueError):
        native.KERNELS.slide_median(window, leaving, values, True)  # type: ignore[union-attr]
    assert window == [1.0, 2.0, 3.0]


def _both(log: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """A stream's events of ``log`` in random chunks, with the kernels and without."""
    compiled = stream_events(log, seed, most=200)
    with monkeypatch.context() as m:
        m.setattr(stream_module, "KERNELS", None)
        python = stream_events(log, seed, most=200)
    return compiled, python


_EDGES = (
    # A tqdm bar redrawn with '\r', then a log record glued to its last redraw.
    "11/29/2026 10:00:01 - INFO - __main__ - step 1/50 | loss 3.0 | 22.2 Ktok/s\n"
    "Training:   2%|2         | 1/50 [00:01<00:40, 1.2it/s, loss=2.3]\rTraining:   4%|4         | 2/50 "
    "[00:02<00:40, 1.2it/s, loss=2.2]11/29/2026 10:00:03 - INFO - __main__ - step 2/50 | loss 2.9 | 22.1 Ktok/s\n"
    # A wide character (a tqdm block bar) in the chunk: the view is not the text.
    "Training:  10%|█         | 5/50 [00:05<00:40, 1.2it/s, loss=2.1, tok/s=21000]\n"
    # A rank prefix, a line that opens with '[', a shape past the cache's limit.
    "[rank3]:11/29/2026 10:00:04 - INFO - train - step 3/50 | loss 2.8 | 21.5 Ktok/s\n"
    "[1/50] loss 2.7 tok/s 21000\n"
    + "x" * 2100 + " step 4/50 loss 2.6\n"
    # Digits in a literal ("Signal 9"), a traceback, and steps after it.
    "torch.distributed.elastic.multiprocessing.api: failed (exitcode: -9) Signal 9 (SIGKILL) received by PID 77\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 3, in <module>\n'
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "11/29/2026 10:00:09 - INFO - __main__ - step 5/50 | loss 2.5 | 22.0 Ktok/s\n"
)


@needs_kernels
@pytest.mark.parametrize("seed", range(4))
def test_stream_walk_gives_the_python_events_on_edges(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "edges.log"
    log.write_text("".join(_EDGES * 3 + "11/29/2026 10:00:10 - INFO - data - loaded shard 7\n" for _ in range(20)),
                   encoding="utf-8")
    compiled, python = _both(log, seed, monkeypatch)
    assert compiled == python
    assert any("Crash" in e for e in compiled) and sum("Progress" in e for e in compiled) > 100


@needs_kernels
@pytest.mark.parametrize("seed", range(6))
def test_stream_walk_gives_the_python_events_on_random_logs(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled, python = _both(random_log(tmp_path / "r.log", seed + 500), seed, monkeypatch)
    assert compiled == python


@needs_kernels
@pytest.mark.parametrize(
    "path", sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".txt")), ids=lambda p: p.name
)
def test_stream_walk_gives_the_python_events_on_fixtures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, python = _both(path, 7, monkeypatch)
    assert compiled == python


_LANE = object()


_DIGITS_0 = bytes.maketrans(b"123456789", b"000000000")


def _take(line: str, entry: tuple[int, object] | None, *, fast: bool = True, wide: str | None = None,
          glued: int = 0, shape_max: int = 2048) -> tuple[tuple[int, int], list[object], list[str], list[str]]:
    """``take_run`` over one candidate line, then a taken one: where it
    stopped, the lanes and lines it set aside, and what ``glued_at`` was
    asked. ``wide``: the line's text in a wide chunk (``line`` is then its
    view, a '?' for each character outside ASCII)."""
    own = line if wide is None else wide
    view = f"{line}\nstep 1 loss 2\n"
    text = f"{own}\nstep 1 loss 2\n"
    ends = [len(line), len(view) - 1]
    cache: dict[bytes, tuple[int, object]] = {b"step 0 loss 0": (1, _LANE)}
    shape = own.encode("utf-8", "surrogatepass").translate(_DIGITS_0)
    if entry is not None:
        cache[shape] = entry
    lanes: list[object] = []
    lines: list[str] = []
    asked: list[str] = []

    def glued_at(whole: str) -> int:
        asked.append(whole)
        return glued

    at = native.KERNELS.take_run(  # type: ignore[union-attr]
        view, text, ends, 0, 0, cache, lines, [], [], lanes, wide is not None, "\r" in line, fast, shape_max, 1,
        glued_at,
    )
    return at, lanes, lines, asked


@needs_kernels
@pytest.mark.parametrize(
    "line, entry, options, taken",
    [
        ("step 7 loss 9", (1, _LANE), {}, True),  # a lane line: set aside, its lane with it
        ("eval 9 bar", (0, None), {}, True),  # a candidate holding nothing: passed over
        ("0%| 3/9 [00:01<00:02, 1.5it/s]", (1, None), {}, True),  # plain progress: its shape for a lane
        ("0%| 3/9 [00:01<00:02, 1.5it/s]", (1, None), {"fast": False}, False),  # no fast path: on its own
        ("[rank1]: 3/9 [00:01, 1.5it/s]", (1, None), {}, False),  # opens with '[': on its own
        ("Traceback (most recent call last):", (2, None), {}, False),  # a trigger
        ("Signal 9 received by PID 7", (1 | 4, None), {}, False),  # digits tested on the line
        ("stage 8 loss 9", None, {}, False),  # a shape not cached yet
        ("a 1/9\rb 2/9 [00:01, 1.5it/s]INFO step 2", (1, _LANE), {"glued": 27}, False),  # a glued record
        ("a 1/9\rb 2/9 [00:01, 1.5it/s]", (1, _LANE), {}, True),  # redraws alone
        ("step ? loss 9", (1, _LANE), {"wide": "step \u00e9 loss 9"}, True),  # a wide chunk's placeholder: its text
        ("step ? loss 9", (1, _LANE), {"wide": "step ? loss 9"}, True),  # ... a real '?' in a wide chunk
        ("step ? loss 9", (1, _LANE), {}, True),  # ... a real '?' in an ASCII chunk
        ("step ? loss 9", None, {"wide": "step \u00e9 loss 9"}, False),  # its text's shape not cached yet
        ("s ? 1/9\rs ? 2/9 [00:01, 1.5it/s]", (1, None), {"wide": "s \u2588 1/9\rs \u2588 2/9 [00:01, 1.5it/s]"}, True),
        ("s ? 1/9\rs 2/9 [00:01]INFO step 2", (1, _LANE), {"wide": "s \u2588 1/9\rs 2/9 [00:01]INFO step 2", "glued": 22}, False),
        ("step ? loss 9", (1, _LANE), {"wide": "step \ud800 loss 9"}, True),  # a lone surrogate encodes
        ("step 7 loss 9", (1, _LANE), {"shape_max": 12}, False),  # past the shape cache's length
    ],
)
def test_take_run_takes_what_python_sets_aside_and_stops_before_the_rest(
    line: str, entry: tuple[int, object] | None, options: dict[str, object], taken: bool
) -> None:
    at, lanes, lines, asked = _take(line, entry, **options)  # type: ignore[arg-type]
    own = options.get("wide", line)
    assert isinstance(own, str)
    if taken:
        assert at == (2, len(line) + 15)  # both lines, past the last
        assert lanes[-1] is _LANE and len(lanes) == (1 if entry is not None and entry[0] == 0 else 2)
        if entry is not None and entry[0] == 1 and entry[1] is None:
            assert lanes[0] == own.encode("utf-8", "surrogatepass").translate(_DIGITS_0)
        if len(lines) == 2:
            assert lines[0] == own and type(lines[0]) is str  # the text itself, never its view
    else:
        assert at == (0, 0) and lanes == []
    assert asked == ([own] if "\r" in line else [])  # glued_at reads the text, not the view


@needs_kernels
@pytest.mark.parametrize("seed", range(12))
def test_take_run_remembers_recent_shapes_and_gives_python_s_shapes(seed: int) -> None:
    """The shapes a call saw lately are reused (``TR_RECENT``): over lines of
    more shapes than it keeps, shapes of one length that differ in one
    byte, lines past its buffer (1024) up to the cache's limit (2048), each
    plain progress line's lane is the bytes ``line_shape`` makes of it; a
    shape the cache does not hold stops the walk at its first line."""
    rng = random.Random(seed)
    templates = [
        "step {} loss {}", "step {} lass {}", "eval {} loss {}", "  {}%|  | {}/9 [00:01, 1.5it/s]",
        "x" * 1100 + " {} {}", "y" * 1500 + " {}/{}", "a {} b {} c", "tok/s {} {}", "z {}{}", "{} {}",
    ]
    lines = []
    for _ in range(400):
        template = rng.choice(templates[: rng.choice([2, 5, 10])])
        lines.append(template.format(rng.randrange(0, 10**rng.randrange(1, 6)), rng.randrange(0, 99)))
    view = "".join(line + "\n" for line in lines)
    ends = list(itertools.accumulate(len(line) + 1 for line in lines))
    ends = [e - 1 for e in ends]
    shapes = [line.encode("ascii").translate(_DIGITS_0) for line in lines]
    cache: dict[bytes, tuple[int, object]] = {shape: (1, None) for shape in shapes}
    missing = rng.choice(shapes[50:])
    if seed % 3 == 0:
        del cache[missing]
    lanes: list[object] = []
    taken: list[str] = []
    at = native.KERNELS.take_run(  # type: ignore[union-attr]
        view, view, ends, 0, 0, cache, taken, [], [], lanes, False, False, True, 2048, 1, glued_at,
    )
    stop = shapes.index(missing) if seed % 3 == 0 else len(lines)
    assert at[0] == stop
    assert taken == lines[:stop] and lanes == shapes[:stop]
    assert all(type(lane) is bytes for lane in lanes)


@needs_kernels
def test_take_run_refuses_a_view_that_is_not_ascii() -> None:
    with pytest.raises(ValueError):
        native.KERNELS.take_run("é\n", "é\n", [1], 0, 0, {}, [], [], [], [], False, False, True, 2048, 1, glued_at)  # type: ignore[union-attr]
    with pytest.raises(ValueError):  # a text unlike its view: offsets would not match
        native.KERNELS.take_run("ab\n", "abc\n", [2], 0, 0, {}, [], [], [], [], True, False, True, 2048, 1, glued_at)  # type: ignore[union-attr]


@needs_kernels
@pytest.mark.parametrize("blocks", [False, True], ids=["ascii", "block-bars"])
@pytest.mark.parametrize("shape", ["quiet", "progress", "ranks"])
def test_take_run_walks_nearly_every_line_of_the_benchmark_shapes(
    shape: str, blocks: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel is worth its keep only if it walks the lines: Python
    takes over a few per chunk (a new shape, a line read on its own), not
    one in ten (a shape made unlike Python's would send every line back).
    ``blocks``: the tqdm bars drawn with block characters, as tqdm draws
    them in a UTF-8 locale: the chunk is wide, and every bar's view holds
    a '?' (the log's first 20k lines are at 0%: their bars are blank)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from speed_logs import write_log

    log = tmp_path / f"{shape}.log"
    write_log(log, 20_000, shape, seed=5)
    if blocks:
        log.write_text(log.read_text(encoding="utf-8").replace("|          |", "|\u2588\u258c        |"), encoding="utf-8")
    kernel = native.KERNELS.take_run  # type: ignore[union-attr]
    returns: list[int] = []

    def counted(*args: object) -> tuple[int, int]:
        returns.append(1)
        return kernel(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(stream_module, "KERNELS", types.SimpleNamespace(
        take_run=counted, ascii_view=native.KERNELS.ascii_view))  # type: ignore[union-attr]
    stream = LogStream("log", replay=True)
    events = stream.feed(log.read_text(encoding="utf-8"), 1, 1_700_000_000.0)
    progress = sum(type(e).__name__ == "Progress" for e in events)
    assert progress > 500
    assert len(returns) < progress / 20, (len(returns), progress)


@needs_kernels
def test_loss_smoothing_uses_the_kernel_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector's ``_smoothed`` with the kernel and without: the same."""
    from dflash_watch.detectors.config import DetectorConfig
    from dflash_watch.detectors.loss import LossDetector

    det = LossDetector(DetectorConfig())
    window = det._smooth
    for v in (2.0, 2.5, 1.5, 3.0, 2.25, 2.0, 2.75, 1.75, 2.5, 2.0):
        window.add(v)
    calls: list[int] = []
    kernel = native.KERNELS.slide_median  # type: ignore[union-attr]

    def counted(*args: object) -> list[float]:
        calls.append(1)
        return kernel(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(loss_steps, "KERNELS", types.SimpleNamespace(slide_median=counted))
    for losses in ([2.1, 2.2, 2.05, 2.4, 2.3], [2.1, 2, 2.4]):  # the second: an int, refused
        compiled = loss_steps._smoothed(det, list(losses))
        with monkeypatch.context() as m:
            m.setattr(loss_steps, "KERNELS", None)
            python = loss_steps._smoothed(det, list(losses))
        assert repr(compiled) == repr(python)
    assert len(calls) == 2


def test_load_refuses_a_stale_or_missing_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another ABI (an editable install's old build), none at all, or the
    variable set: the Python loops."""
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    stale = types.SimpleNamespace(ABI=native.ABI + 1)
    monkeypatch.setattr(native.importlib, "import_module", lambda name, package=None: stale)
    assert native._load() is None

    def missing(name: str, package: str | None = None) -> types.ModuleType:
        raise ImportError(name)

    monkeypatch.setattr(native.importlib, "import_module", missing)
    assert native._load() is None
    current = types.SimpleNamespace(ABI=native.ABI)
    monkeypatch.setattr(native.importlib, "import_module", lambda name, package=None: current)
    assert native._load() is current
    monkeypatch.setenv(native.PURE_ENV, "1")
    assert native._load() is None
    monkeypatch.setattr(native, "KERNELS", None)
    assert native.status() == f"pure Python ({native.PURE_ENV} set)"
    monkeypatch.setenv(native.PURE_ENV, "0")
    assert native.status() == "pure Python (compiled kernels not built)"


def test_the_kernels_are_built_where_a_compiler_is() -> None:
    """Where a C compiler and Python's headers are found, an install builds
    the kernels: else the compiled path would go untested without a word
    (an install made before the kernels existed needs ``pip install -e .``
    again)."""
    import os
    import shutil
    import sysconfig

    if native.pure_asked():
        pytest.skip(f"{native.PURE_ENV} is set: the Python loops are asked for")
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the kernels are not built, the Python loops run")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python headers here: the kernels are not built, the Python loops run")
    assert native.KERNELS is not None, (
        f"{native.status()}: a C compiler is here; run `python3 -m pip install -e .` again to build them"
    )


def _python_cut(lines: list[str], start: int, stop: int, ints: bool) -> list[int] | list[float] | str:
    """The column as Python reads it, or the error it raises."""
    try:
        return [(int if ints else float)(line[start:stop]) for line in lines]  # type: ignore[misc]
    except ValueError as exc:
        return f"ValueError: {exc}"


@needs_kernels
@pytest.mark.parametrize(
    "texts, ints, takes",
    [
        (["12", "07", "99"], True, True),
        (["999999999999999999", "000000000000000007"], True, True),  # 18 digits: the most it takes
        (["1.5", "0.0", "2.5"], False, True),
        (["-0.0", "1e-5", "1e400", "5e-0"], False, True),  # signed zero, an overflow to inf
        (["2.5E+3", "0.1e+1"], False, True),
        ([".5", "5."], False, True),
        (["3", "4"], False, True),
        (["1_000"], True, False),  # int() takes it, the kernel does not: Python reads it
        ([" 12"], True, False),
        (["+5"], True, False),
        (["1.2.3"], False, False),  # neither reads it: Python raises as before
        (["nan", "inf"], False, False),
        (["1e"], False, False),
        (["١٢"], True, False),  # Arabic-Indic digits: int() reads them, the kernel does not
        (["9999999999999999999"], True, False),  # 19 digits: past the kernel's int
    ],
)
def test_cut_numbers_reads_as_int_and_float_do_or_hands_back(texts: list[str], ints: bool, takes: bool) -> None:
    for width in sorted(set(map(len, texts))):  # a column is one shape: one width
        lines = [f"step {t} |" for t in texts if len(t) == width]
        got = native.KERNELS.cut_numbers(lines, 5, 5 + width, ints)  # type: ignore[union-attr]
        want = _python_cut(lines, 5, 5 + width, ints)
        if not takes:  # handed back: what Python gives then is the answer
            assert got is None, lines
            continue
        assert got is not None, lines
        assert [repr(v) for v in got] == [repr(v) for v in want]
        assert [type(v) for v in got] == [type(v) for v in want]


@needs_kernels
@pytest.mark.parametrize("seed", range(30))
def test_cut_numbers_is_int_and_float_on_random_columns(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "0123456789" * 4 + ".eE+- _x█"
    width = rng.randrange(1, 30)
    texts = ["".join(rng.choice(alphabet) for _ in range(width)) for _ in range(20)]
    if seed % 3 == 0:  # mostly numbers that parse
        texts = [repr(rng.uniform(-1e6, 1e6))[:width].ljust(width, "0") for _ in range(20)]
    lines = [f"[{t}]" for t in texts] + (["[1]"] if seed % 7 == 0 else [])  # a short line: past its end
    for ints in (True, False):
        got = native.KERNELS.cut_numbers(lines, 1, 1 + width, ints)  # type: ignore[union-attr]
        want = _python_cut(lines, 1, 1 + width, ints)
        if got is not None:
            assert [repr(v) for v in got] == [repr(v) for v in want], texts


@needs_kernels
def test_cut_numbers_takes_the_usual_columns() -> None:
    """Handing back is always safe, so a kernel that handed back everything
    would pass the tests above: it must take plain numbers."""
    lines = ["step 12/500 | loss 2.3456 | 21.5 Ktok/s", "step 13/500 | loss 2.1234 | 20.9 Ktok/s"]
    assert native.KERNELS.cut_numbers(lines, 5, 7, True) == [12, 13]  # type: ignore[union-attr]
    assert native.KERNELS.cut_numbers(lines, 19, 25, False) == [2.3456, 2.1234]  # type: ignore[union-attr]
    bars = ["Training:  10%|█         | 5/50 [00:05<00:40, 1.23it/s]"]
    assert native.KERNELS.cut_numbers(bars, 27, 28, True) == [5]  # type: ignore[union-attr]
    assert native.KERNELS.cut_numbers(bars, 46, 50, False) == [1.23]  # type: ignore[union-attr]


def _tops_reference(steps: list[int | None], gaps: list[float], series: list[bool], tops: list[int | None],
                    silence: float, jitter: float) -> int:
    """``throughput_quiet._steady``'s loop over the run, as written there."""
    for s, g, k in zip(steps, gaps, series):
        if not 0.0 <= g < silence or s is None:
            return 0
        if s >= tops[k]:  # type: ignore[operator]
            tops[k] = s
        elif g > jitter:
            return 0
    return 1


@needs_kernels
@pytest.mark.parametrize("seed", range(60))
def test_series_tops_is_the_python_walk(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(0, 40)
    two = seed % 2 == 0
    series = [rng.random() < 0.5 if two else True for _ in range(n)]
    tops: list[int | None] = [rng.randrange(0, 50), rng.randrange(0, 50)]
    steps: list[int | None] = []
    top = {False: tops[0] or 0, True: tops[1] or 0}
    for k in series:  # mostly rising per series, now and then a step back or an odd value
        r = rng.random()
        if r < 0.05:
            steps.append(None)
        elif r < 0.15:
            steps.append(top[k] - rng.randrange(1, 5))  # behind: a rank just behind, or a relaunch
        else:
            top[k] += rng.randrange(0, 3)
            steps.append(top[k])
    gaps = [rng.choice((0.0, 0.5, 1.0, 2.0, 2.5, 0.01)) if rng.random() < 0.95
            else rng.choice((-0.5, 600.0, 700.0, math.nan, 3.0, -0.0)) for _ in range(n)]
    want_tops, got_tops = list(tops), list(tops)
    want = _tops_reference(steps, gaps, series, want_tops, 600.0, 2.0)
    got = native.KERNELS.series_tops(steps, gaps, series, got_tops, 600.0, 2.0)  # type: ignore[union-attr]
    assert got == want
    if want:
        assert got_tops == want_tops
        assert [type(t) for t in got_tops] == [type(t) for t in want_tops]


@needs_kernels
@pytest.mark.parametrize(
    "steps, gaps, series, tops",
    [
        ([3], [1.0], [1], [0, 0]),  # a series that is an int, not a bool
        ([3.0], [1.0], [True], [0, 0]),  # a step that is a float
        ([3], [1], [True], [0, 0]),  # a gap that is an int
        ([2**70], [1.0], [True], [0, 0]),  # past 64 bits
        ([3], [1.0], [True], [0, None]),  # a series without a top
        ([3], [1.0], [True], [0]),  # not two series
    ],
)
def test_series_tops_hands_back_what_it_cannot_read(
    steps: list[object], gaps: list[object], series: list[object], tops: list[object]
) -> None:
    before = list(tops)
    assert native.KERNELS.series_tops(steps, gaps, series, tops, 600.0, 2.0) == -1  # type: ignore[union-attr,arg-type]
    assert tops == before


def _stamp_lines(rng: random.Random, frac_len: int, iso: bool) -> list[str]:
    """Lines of one stamp shape: a few minutes, now and then an odd line
    (a second of 60 or with a blank, a short line, a letter in the
    fraction, a character outside ASCII)."""
    lines = []
    minute = rng.randrange(0, 50)
    for _ in range(rng.randrange(1, 80)):
        if rng.random() < 0.1:
            minute += 1
        sec = f"{rng.randrange(0, 60):02d}"
        frac = "".join(rng.choice("0123456789") for _ in range(frac_len))
        r = rng.random()
        if r < 0.03:
            sec = "60"
        elif r < 0.06:
            sec = sec[0] + rng.choice(" a")
        elif r < 0.08 and frac_len:
            frac = frac[:-1] + "x"
        day = "2026-11-29 10" if iso else "11/29/2026 10"
        sep = "," if iso else "."
        line = f"{day}:{minute:02d}:{sec}{sep + frac if frac_len else ''} - INFO - step {rng.randrange(99)}"
        if r > 0.98:
            line = line.replace("INFO", "INFÖ")
        elif r > 0.96:
            line = line[:18]
        lines.append(line)
    return lines


@needs_kernels
@pytest.mark.parametrize("seed", range(40))
def test_minute_stamps_gives_the_python_runs(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``TimeParser.iso_run`` and ``us_run`` with the kernel and without:
    the same stamps (every bit), the same stop, the parser left alike."""
    from dflash_watch.parsers import timestamps
    from dflash_watch.parsers.timestamps import TimeParser

    rng = random.Random(seed)
    frac_len = rng.choice((0, 0, 3, 3, 6, 9))
    iso = seed % 2 == 0
    lines = _stamp_lines(rng, frac_len, iso)
    calls: list[int] = []
    kernel = native.KERNELS.minute_stamps  # type: ignore[union-attr]

    def counted(*args: object) -> int:
        calls.append(1)
        return kernel(*args)  # type: ignore[arg-type]

    def run() -> tuple[list[str] | str, dict[str, object]]:
        parser = TimeParser()
        try:  # a line the shape would not hold (cut short): the same error both ways
            got: list[str] | str = [repr(v) for v in (parser.iso_run if iso else parser.us_run)(lines, frac_len)]
        except ValueError as exc:
            got = repr(exc)
        return got, {k: getattr(parser, k) for k in ("_min_key", "_min_val", "_year", "_month")}

    monkeypatch.setattr(timestamps, "KERNELS", types.SimpleNamespace(minute_stamps=counted))
    compiled = run()
    monkeypatch.setattr(timestamps, "KERNELS", None)
    python = run()
    assert compiled == python
    assert calls or len(lines) < 2 or not python[0]


@needs_kernels
def test_minute_stamps_reads_a_minute_and_stops_at_the_next() -> None:
    lines = ["11/29/2026 10:07:05.250 a", "11/29/2026 10:07:59.999 b", "11/29/2026 10:08:00.000 c"]
    out: list[float] = []
    at = native.KERNELS.minute_stamps(lines, 0, "11/29/2026 10:07", 1000.0, 3, out)  # type: ignore[union-attr]
    assert at == 2
    assert out == [1000.0 + 5 + 250 / 1000, 1000.0 + 59 + 999 / 1000]
    assert native.KERNELS.minute_stamps(lines, 2, "11/29/2026 10:07", 1000.0, 3, out) == 2  # type: ignore[union-attr]


@needs_kernels
@pytest.mark.parametrize("frac_len", range(10))
def test_minute_stamps_adds_as_python_adds(frac_len: int) -> None:
    """Every bit: ``base + seconds + fraction / 10 ** frac_len``, Python's
    order and its true division (with a base of 0 no rounding hides a
    fraction read another way)."""
    rng = random.Random(frac_len)
    for base in (0.0, -0.0, 1.5, 1_764_410_400.0):
        lines, want = [], []
        for _ in range(300):
            sec = rng.randrange(60)
            frac = rng.randrange(10**frac_len)
            digits = f"{frac:0{frac_len}d}" if frac_len else ""
            lines.append(f"11/29/2026 10:07:{sec:02d}.{digits} x")
            want.append(base + int(f"{sec:02d}") + int(digits) / 10**frac_len if frac_len else base + sec + 0.0)
        out: list[float] = []
        assert native.KERNELS.minute_stamps(lines, 0, "11/29/2026 10:07", base, frac_len, out) == len(lines)  # type: ignore[union-attr]
        assert [repr(v) for v in out] == [repr(v) for v in want]


def _look_back_text(rng: random.Random) -> tuple[str, list[tuple[int, int]]]:
    """Lines a tqdm bar is dated by, and the windows ``latest`` is asked
    about: stamped lines of one or two minutes (ISO or US, with a fraction
    of the parsed length, another length or none), and now and then what
    ``_same_minute`` must refuse or read on: a zone or a digit after the
    fraction or the seconds, a comma, a second of 60, a short line, a
    letter, a bar with block characters, glog and bare lines, a bar glued
    to a log line, blank lines."""
    frac_len = rng.choice((0, 3, 6))
    iso = rng.random() < 0.5
    day = "2026-11-29 10" if iso else "11/29/2026 10"
    lines = []
    minute = rng.randrange(0, 50)
    for _ in range(rng.randrange(2, 40)):
        if rng.random() < 0.15:
            minute += 1
        sec = f"{rng.randrange(0, 60):02d}"
        n = frac_len if rng.random() < 0.85 else rng.choice((0, 2, 3, 7))
        mark = rng.choice(".,") if n else ""
        frac = "".join(rng.choice("0123456789") for _ in range(n))
        tail = rng.choice((" - INFO - loaded shard 7", "", "Z x", "+01:00 x", "7 x", " x", "-x", "\u2588 x"))
        line = f"{day}:{minute:02d}:{sec}{mark}{frac}{tail}"
        r = rng.random()
        if r < 0.04:
            line = line[:17] + "60" + line[19:]
        elif r < 0.07:
            line = line[:rng.randrange(10, 20)]
        elif r < 0.10:
            line = line[:16] + "-" + line[17:]
        elif r < 0.13:
            line = "W1129 10:07:05.467022 4246 dataloader.cc:738] slow"
        elif r < 0.16:
            line = "Training:  10%|\u2588         | 4/40 [00:04<00:36, 1.0it/s]"
        elif r < 0.18:
            line = "bar 4/40\r" + line
        elif r < 0.20:
            line = ""
        elif r < 0.22:
            line = " " + line
        elif r < 0.25:  # another year, zoned: sets the year glog lines take, not the minute
            line = "2024-06-01T08:00:00Z - WARNING - x"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    ends = [i for i, c in enumerate(text) if c == "\n"]
    windows = []
    for _ in range(12):
        a, b = sorted(rng.sample(range(len(ends) + 1), 2)) if len(ends) > 1 else (0, 1)
        lo = 0 if a == 0 else ends[a - 1] + 1
        hi = ends[b - 1] + 1 if rng.random() < 0.8 else ends[b - 1]  # with its newline, or without
        windows.append((lo, max(hi, lo + 1)))
    return text, windows


@needs_kernels
@pytest.mark.parametrize("seed", range(60))
def test_last_minute_gives_the_python_look_back(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``LineTimes.latest`` with the kernel and without, over the same
    windows in turn: the same stamp (every bit) and the parser left alike
    (year and month: glog lines after take them). The kernel must answer
    in the common case, or it is worth nothing."""
    from dflash_watch.parsers import timestamps
    from dflash_watch.parsers.line_times import LineTimes
    from dflash_watch.parsers.timestamps import TimeParser

    rng = random.Random(seed)
    text, windows = _look_back_text(rng)
    if rng.random() < 0.5:
        text = text.replace("\u2588", "#")  # an ASCII chunk as well as a wide one
    kernel = native.KERNELS.last_minute  # type: ignore[union-attr]
    answered: list[float] = []

    def counted(*args: object) -> float | None:
        value = kernel(*args)  # type: ignore[arg-type]
        if value is not None:
            answered.append(value)
        return value

    def run() -> list[object]:
        dating = LineTimes(TimeParser(default_year=2026), "log:")
        out: list[object] = []
        for lo, hi in windows:
            value = dating.latest(text, lo, hi)
            out.append((repr(value), dating.times._year, dating.times._month, dating.times._min_key))
        return out

    monkeypatch.setattr(timestamps, "KERNELS", types.SimpleNamespace(last_minute=counted))
    compiled = run()
    monkeypatch.setattr(timestamps, "KERNELS", None)
    python = run()
    assert compiled == python


@needs_kernels
def test_last_minute_dates_the_bars_of_the_progress_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Worth its keep only if it answers the common look back: a tqdm bar
    after a stamped line of the minute read last, in issue 20's log."""
    import sys

    from dflash_watch.parsers import timestamps

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from speed_logs import write_log

    log = tmp_path / "progress.log"
    write_log(log, 20_000, "progress", seed=5)
    kernel = native.KERNELS.last_minute  # type: ignore[union-attr]
    asked: list[bool] = []

    def counted(*args: object) -> float | None:
        value = kernel(*args)  # type: ignore[arg-type]
        asked.append(value is not None)
        return value

    monkeypatch.setattr(timestamps, "KERNELS", types.SimpleNamespace(last_minute=counted))
    _without_clocks(monkeypatch)  # (else ``in_order`` reads the time parser itself: below)
    events = LogStream("log", replay=True).feed(log.read_text(encoding="utf-8"), 1, 1_700_000_000.0)
    bars = sum(type(e).__name__ == "Progress" and e.elapsed_s is not None for e in events)  # type: ignore[attr-defined]
    assert bars > 500
    # (a bar right after a step line needs no look back: the step dated it)
    assert len(asked) >= bars / 2 and sum(asked) >= len(asked) * 0.9, (bars, len(asked), sum(asked))


def _without_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lanes``' kernels with ``in_order`` given no clocks: it calls
    ``latest`` and ``unstamped`` for every bar, as before it read them."""
    from dflash_watch.parsers import lanes as lanes_module

    kernel = native.KERNELS.in_order  # type: ignore[union-attr]

    def no_clocks(*args: object) -> int:
        return kernel(*args[:16])  # type: ignore[arg-type]

    names = ("line_numbers", "rank_numbers", "lane_groups", "sources")
    kernels = types.SimpleNamespace(in_order=no_clocks, **{n: getattr(native.KERNELS, n) for n in names})
    monkeypatch.setattr(lanes_module, "KERNELS", kernels)


@needs_kernels
@pytest.mark.parametrize("shape", ["progress", "nan"])
def test_in_order_reads_the_clocks_behind_latest_and_unstamped(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the stream's time parser and step clock, ``in_order`` dates a
    bar after a stamped line of the minute held and runs it on itself (its
    slots, as ``last_in_minute`` and ``unstamped`` read and set them), the
    methods called only where it cannot: the same events, times and
    ``clocked`` as when it calls them for every bar, and as the Python loop."""
    import sys

    from dflash_watch.parsers import lanes as lanes_module
    from dflash_watch.parsers.line_times import LineTimes
    from dflash_watch.parsers.step_clock import StepClock

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from speed_logs import write_log
    finally:
        sys.path.pop(0)
    log = tmp_path / f"{shape}.log"
    write_log(log, 20_000, shape, seed=5)
    calls = {"latest": 0, "unstamped": 0}
    latest, unstamped = LineTimes.latest, StepClock.unstamped

    def latest_counted(self: LineTimes, *args: object) -> float | None:
        calls["latest"] += 1
        return latest(self, *args)  # type: ignore[arg-type]

    def unstamped_counted(self: StepClock, *args: object) -> tuple[float, bool]:
        calls["unstamped"] += 1
        return unstamped(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(LineTimes, "latest", latest_counted)
    monkeypatch.setattr(StepClock, "unstamped", unstamped_counted)
    outs = []
    for how in ("clocks", "callbacks", "python"):
        calls.update(latest=0, unstamped=0)
        with monkeypatch.context() as m:
            if how == "callbacks":
                _without_clocks(m)
            elif how == "python":
                m.setattr(lanes_module, "KERNELS", None)
            outs.append((_fed(log, 11, 300), dict(calls)))
    (own, by_clocks), (called, by_calls), (python, _) = outs
    assert own == called == python
    bars = sum(1 for line in own[0] if line.startswith("Progress(") and "elapsed_s=None" not in line)
    assert bars > 500
    assert by_calls["latest"] >= bars / 2 and by_calls["unstamped"] >= bars / 2, (bars, by_calls)
    # (``latest`` still reads a bar after a line of another minute, or unstamped)
    assert by_clocks["latest"] <= by_calls["latest"] / 5 and by_clocks["unstamped"] <= by_calls["unstamped"] / 10, (
        by_clocks, by_calls,
    )


@needs_kernels
def test_last_minute_reads_the_minute_and_refuses_the_rest() -> None:
    key = "11/29/2026 10:07"
    last = native.KERNELS.last_minute  # type: ignore[union-attr]
    text = "x\n11/29/2026 10:07:05.250 - INFO - a\n"
    assert last(text, 0, len(text), key, 1000.0, 3) == 1000.0 + 5 + 250 / 1000
    assert last(text, 0, len(text) - 1, key, 1000.0, 3) == 1000.0 + 5 + 250 / 1000  # no newline at the end
    assert last(text, 0, len(text), key, 1000.0, 2) is None  # another fraction length: Python reads it
    assert last("11/29/2026 10:07:05 a\n", 0, 22, key, 1000.0, 0) == 1005.0
    assert last("11/29/2026 10:07:05\n", 0, 20, key, 1000.0, 0) == 1005.0  # the line ends at the seconds
    for refused in (
        "11/29/2026 10:08:05 a\n",  # another minute
        "11/29/2026 10:07:60 a\n",  # a 60th second
        "11/29/2026 10:07:05Z a\n",  # a zone
        "11/29/2026 10:07:05.250+01:00 a\n",  # a zone after the fraction
        "11/29/2026 10:07:05.2501 a\n",  # a longer fraction
        "11/29/2026 10:07-05 a\n",
        "11/29/2026 10:07:0\n",
        "11/29/2026 10:07:05. x\n",  # a mark without a fraction (none parsed)
        "a\n",
    ):
        assert last(refused, 0, len(refused), key, 1000.0, 3 if ".250" in refused else 0) is None, refused
    assert last(text, 0, len(text), "", 1000.0, 3) is None  # no minute read yet
    assert last(text, 0, len(text), "W1129 10:07:05.2", 1000.0, 3) is None  # not a full date
    wide = "\u2588\n11/29/2026 10:07:05.250 \u2588\n"
    assert last(wide, 0, len(wide), key, 1000.0, 3) == 1000.0 + 5 + 250 / 1000


def _numbers_reference(view: str, pos: int, number: int, starts: list[int]) -> list[int]:
    """``lanes.read_lanes``' count, as written there."""
    from itertools import accumulate, repeat

    out = list(accumulate(map(view.count, repeat("\n"), [pos, *starts[:-1]], starts), initial=number))
    del out[0]
    return out


@needs_kernels
@pytest.mark.parametrize("seed", range(40))
def test_line_numbers_counts_as_str_count(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "ab\n\n\r?" + ("\xe9" if seed % 3 == 1 else "")  # a Latin-1 view is one byte a character too
    view = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 200)))
    n = len(view)
    starts = sorted(rng.randrange(0, n + 20) for _ in range(rng.randrange(0, 12)))
    if seed % 4 == 3 and starts:  # out of order, as str.count takes it: nothing between
        rng.shuffle(starts)
    pos = rng.randrange(0, n + 5)
    number = rng.randrange(0, 10**6)
    got = native.KERNELS.line_numbers(view, pos, number, starts)  # type: ignore[union-attr]
    assert got == _numbers_reference(view, pos, number, starts)


@needs_kernels
def test_line_numbers_leaves_wide_views_and_negative_offsets_to_python() -> None:
    count = native.KERNELS.line_numbers  # type: ignore[union-attr]
    assert count("a\n\u2588\nb\n", 0, 1, [2, 4]) is None
    assert count("a\nb\n", -1, 1, [2]) is None
    assert count("a\nb\n", 0, 1, [2, -1]) is None
    assert count("a\nb\nc\n", 0, 7, [2, 4, 6]) == [8, 9, 10]
    assert count("", 0, 3, []) == []


@needs_kernels
@pytest.mark.parametrize("seed", range(30))
def test_build_progress_is_the_python_builder(seed: int) -> None:
    """The compiled builder against the Python one: the same object from
    the same arguments (positional, keywords, defaults), the same errors."""
    import dataclasses

    from dflash_watch.parsers.events import Progress, _progress_builder

    python = _progress_builder()
    build = native.KERNELS.build_progress  # type: ignore[union-attr]
    names = [f.name for f in dataclasses.fields(Progress)]
    rng = random.Random(seed)
    pool = [None, 0, -1, 2.5, math.nan, "x:1", (("lr", 1e-3),), True, False, 10**30]
    values = [rng.choice(pool) for _ in names]
    cut = rng.randrange(2, len(names) + 1)
    args = values[:cut]
    kwargs = {name: value for name, value in zip(names[cut:], values[cut:]) if rng.random() < 0.5}
    made, want = build(*args, **kwargs), python(*args, **kwargs)
    assert type(made) is type(want) is Progress
    for name in names:
        a, b = getattr(made, name), getattr(want, name)
        assert a is b, name
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.time = 1.0
    bad: list[tuple[tuple[object, ...], dict[str, object]]] = [
        ((1.0,), {}),  # a required field missing
        ((), {"source": "x"}),
        (tuple(values) + (None,), {}),  # one too many
        ((1.0, "x"), {"nope": 1}),
        ((1.0, "x"), {"time": 2.0}),  # twice
        ((1.0, "x", 3), {names[2]: 4}),
    ]
    for bad_args, bad_kwargs in bad:
        with pytest.raises(TypeError):
            python(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            build(*bad_args, **bad_kwargs)


@needs_kernels
def test_build_progress_stores_slots_with_their_references() -> None:
    """Progress's fields are plain object slots, stored directly: each value
    gains one reference while the event lives and loses it when it goes."""
    import sys

    from dflash_watch.parsers.events import Progress

    build = native.KERNELS.build_progress  # type: ignore[union-attr]
    source, metrics = "rank7:" + str(id(object())), (("lr", 1e-3),)
    before = sys.getrefcount(source), sys.getrefcount(metrics)
    made = [build(1.0, source, metrics=metrics) for _ in range(100)]
    assert all(type(p) is Progress and p.source is source and p.metrics is metrics for p in made)
    assert (sys.getrefcount(source), sys.getrefcount(metrics)) == (before[0] + 100, before[1] + 100)
    del made
    assert (sys.getrefcount(source), sys.getrefcount(metrics)) == before


@needs_kernels
def test_build_progress_goes_through_descriptors_that_are_not_plain_slots() -> None:
    """A class whose field is no plain slot (here a property) is built
    through each descriptor's setter, as ``object.__setattr__`` would."""
    from dflash_watch.parsers import events

    kernels = native.KERNELS
    assert kernels is not None

    class Slotted:
        __slots__ = ("a", "_b")

        @property
        def b(self) -> object:
            return self._b

        @b.setter
        def b(self, value: object) -> None:
            self._b = ("set", value)

    try:
        kernels.set_progress(Slotted, ("a", "b"), (Slotted.a, Slotted.b), (None, 5), 1)
        made = kernels.build_progress(1)
        assert type(made) is Slotted and made.a == 1 and made.b == ("set", 5)
        kernels.set_progress(Slotted, ("a", "_b"), (Slotted.a, Slotted._b), (None, 5), 1)
        made = kernels.build_progress(2, 3)
        assert (made.a, made._b) == (2, 3)  # both plain slots: stored directly
    finally:
        events._compiled_builder()  # Progress again, for every later test
    assert type(kernels.build_progress(1.0, "x")) is events.Progress


def _fed(log: Path, seed: int, most: int) -> tuple[list[str], tuple[object, ...]]:
    """``stream_events`` of ``log``, and what the stream's reading left
    behind after each chunk: its stamped lines counted, its time parser's
    minute, year and month (glog lines take them), and the calls made to
    ``TimeParser.minute_entered`` and ``StepClock.stamped`` so far, and the
    step clock's state."""
    from dflash_watch import ingest

    rng = random.Random(seed)
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    stream = ingest.LogStream("log", replay=True)
    out: list[str] = []
    after: list[object] = []
    at = 0
    while at < len(lines):
        n = rng.randrange(1, most)
        out.extend(map(repr, stream.feed("".join(lines[at : at + n]), at + 1, 1_700_000_000.0)))
        times = stream._times
        steps = stream._steps
        after.append((
            stream._dating.own_count, times._min_key, times._year, times._month, tuple(_CALLS),
            steps._stamp, steps._base, steps._elapsed, steps._step,
        ))
        at += n
    out.extend(map(repr, stream.flush(1_700_000_000.0)))
    return out, tuple(after)


_CALLS = [0, 0]  # minute_entered, stamped: calls so far (``_fed``)


def _lanes_both(log: Path, seed: int, monkeypatch: pytest.MonkeyPatch, most: int) -> tuple[object, object, int]:
    """``_fed`` of ``log`` with ``in_order`` and with ``_read_in_order``'s
    Python loop; and the lines the kernel read."""
    from dflash_watch.parsers import lanes as lanes_module
    from dflash_watch.parsers.step_clock import StepClock
    from dflash_watch.parsers.timestamps import TimeParser

    kernel = native.KERNELS.in_order  # type: ignore[union-attr]
    read = [0]

    def counted(i: int, lanes: list[object], *rest: object) -> int:
        stop = kernel(i, lanes, *rest)
        read[0] += stop - i
        return stop

    entered, stamped = TimeParser.minute_entered, StepClock.stamped

    def entered_counted(self: TimeParser) -> None:
        _CALLS[0] += 1
        entered(self)

    def stamped_counted(self: StepClock) -> None:
        _CALLS[1] += 1
        stamped(self)

    monkeypatch.setattr(TimeParser, "minute_entered", entered_counted)
    monkeypatch.setattr(StepClock, "stamped", stamped_counted)
    both = []
    for kernels in (
        types.SimpleNamespace(
            in_order=counted,
            line_numbers=native.KERNELS.line_numbers,  # type: ignore[union-attr]
            rank_numbers=native.KERNELS.rank_numbers,  # type: ignore[union-attr]
            lane_groups=native.KERNELS.lane_groups,  # type: ignore[union-attr]
            sources=native.KERNELS.sources,  # type: ignore[union-attr]
        ),
        None,
    ):
        _CALLS[:] = [0, 0]
        with monkeypatch.context() as m:
            m.setattr(lanes_module, "KERNELS", kernels)
            both.append(_fed(log, seed, most))
    return both[0], both[1], read[0]


@needs_kernels
@pytest.mark.parametrize("seed", range(30))
def test_in_order_reads_random_logs_as_the_python_loop(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random logs (US, ISO and glog stamps, bars redrawn or not, unstamped
    step lines with step times, stamps that step back, silences): the same
    events, times and ``clocked`` included, with the kernel and without."""
    log = random_log(tmp_path / "r.log", seed, lines=1500)
    compiled, python, read = _lanes_both(log, seed, monkeypatch, most=200 if seed % 2 else 20)
    assert compiled == python
    assert read > 0


@needs_kernels
@pytest.mark.parametrize("shape", ["progress", "ranks", "nan", "degraded"])
def test_in_order_reads_the_speed_logs_as_the_python_loop(shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20's shapes (step lines with bars between, minutes that
    change, tracebacks): the kernel reads most of their progress lines;
    not the ranks' (rank prefixes: ``_read_by_stretch``), which must still
    come out the same."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from speed_logs import write_log
    finally:
        sys.path.pop(0)
    log = tmp_path / f"{shape}.log"
    write_log(log, 20_000, shape)
    compiled, python, read = _lanes_both(log, 7, monkeypatch, most=400)
    assert compiled == python
    progress = sum(1 for line in compiled[0] if line.startswith("Progress("))
    assert read >= progress * 0.8 or (shape == "ranks" and read == 0), (read, progress)


@needs_kernels
def test_in_order_reads_stamped_lines_wide_past_their_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step line that holds a character outside ASCII past its stamp (a
    bar's block, a check mark) is read by the kernel as any other: only
    its stamp's characters are read there; one inside the stamp goes back."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from speed_logs import write_log
    finally:
        sys.path.pop(0)
    log = tmp_path / "wide.log"
    write_log(log, 6_000, "progress")
    text = log.read_text(encoding="utf-8").replace(" Ktok/s | lr ", " Ktok/s \u2713 | lr ")
    assert "\u2713" in text
    log.write_text(text, encoding="utf-8")
    compiled, python, read = _lanes_both(log, 3, monkeypatch, most=300)
    assert compiled == python
    steps = text.count("\u2713")
    assert read >= steps, (read, steps)


def _exact(value: object) -> object:
    """``value`` with each float as its hex digits and each item's type:
    equal only where every bit is (``==`` takes -0.0 for 0.0, never a NaN)."""
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *map(_exact, value)]
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


@needs_kernels
def test_in_order_runs_the_step_clock_with_python_s_rounding() -> None:
    """Step times that a fused multiply-add (one rounding for the product
    and the sum, where a compiler merges them) would add up otherwise than
    Python (two): 81.00000000000001 after these, not 81.0."""
    steps: list[object] = [3, 4, 11, 18, 25, 32]
    own = _bars_through_in_order([1000.0] * 6, steps, [2.7] * 6, own_clock=True)
    called = _bars_through_in_order([1000.0] * 6, steps, [2.7] * 6, own_clock=False)
    assert _exact(own[:3]) == _exact(called[:3])
    assert own[2][2] == 2.7 + 2.7 * 1 + 2.7 * 7 + 2.7 * 7 + 2.7 * 7 + 2.7 * 7


def _bars_through_in_order(
    times: list[float], steps: list[object], seconds: list[object], own_clock: bool
) -> tuple[list[object], list[object], tuple[object, ...], int]:
    """One run of bars (one ``Bare`` lane, a gap before each line, so each
    is dated by ``latest``: ``times`` in turn) through ``in_order`` with the
    stream's clocks (``own_clock``: the step clock's slots read in C) or
    with ``unstamped`` called for each; the stamps, clocked, the step
    clock's slots after, and the calls to ``unstamped``."""
    from dflash_watch.parsers.step_clock import DRIFT_MIN_S, DRIFT_SHARE, StepClock
    from dflash_watch.parsers.timestamps import TimeParser

    clock = StepClock()
    calls = [0]

    def unstamped(*args: object) -> tuple[float, bool]:
        calls[0] += 1
        return clock.unstamped(*args)  # type: ignore[arg-type]

    dated = iter(times)
    n = len(times)
    lane = object()
    stamps: list[object] = []
    clocked: list[object] = []
    made = {id(lane): (stamps, iter(range(n)), None, 0, 1, clocked, steps, seconds)}
    state = [None, None, 0, 0.0, False, 0, None, 0.0, False]
    starts = [10 * k + 5 for k in range(n)]
    ends = [start + 3 for start in starts]
    text = "x" * (10 * n + 10)
    clocks = (TimeParser(), clock, DRIFT_MIN_S, DRIFT_SHARE) if own_clock else None  # (no minute read: ``latest``)
    stop = native.KERNELS.in_order(  # type: ignore[union-attr]
        0, [lane] * n, made, ["bar"] * n, starts, ends, [], state, text, 0.0, lambda *a: next(dated),
        None, None, lambda: None, unstamped, 2.0, clocks,
    )
    assert stop == n
    return stamps, clocked, (clock._stamp, clock._base, clock._elapsed, clock._step), calls[0]


@needs_kernels
@pytest.mark.parametrize("seed", range(40))
def test_in_order_runs_the_step_clock_as_unstamped_does(seed: int) -> None:
    """The step clock's slots read and set in C against ``StepClock.unstamped``
    called for each bar: stamps that repeat, drift ahead a little or a lot,
    fall behind; steps that go on, skip, repeat, go back or are missing;
    step times missing, zero, negative; a stamp or step of another type
    (an int time, a huge step: the method is called for those)."""
    rng = random.Random(seed)
    n = rng.randrange(1, 120)
    times: list[float] = []
    steps: list[object] = []
    seconds: list[object] = []
    t, step = 1000.0, 0
    for _ in range(n):
        roll = rng.random()
        if roll < 0.3:
            pass  # the same stamp again
        elif roll < 0.6:
            t += rng.choice([1.0, 5.0, 30.0, 59.0, 61.0, 300.0, 4000.0])
        elif roll < 0.75:
            t -= rng.choice([0.5, 10.0, 100.0])
        else:
            t += rng.random() * 10
        times.append(int(t) if rng.random() < 0.03 else t)
        roll = rng.random()
        if roll < 0.6:
            step += rng.choice([1, 1, 1, 2, 7])
        elif roll < 0.7:
            step -= rng.choice([1, 3, 50])
        steps.append(None if rng.random() < 0.07 else (2**70 if rng.random() < 0.02 else step))
        seconds.append(
            rng.choice([None, 0.0, -0.0, -1.0, 0.25, 1.5, 2.7, 13.0, 120.0, 3, math.nan, math.inf])
            if rng.random() < 0.3 else rng.choice([1.5, 2.7, 0.1])
        )
    own = _bars_through_in_order(times, steps, seconds, own_clock=True)
    called = _bars_through_in_order(times, steps, seconds, own_clock=False)
    # Each value and its type as written (a float's every bit, NaN and -0.0 alike).
    assert _exact(own[:3]) == _exact(called[:3])
    # (called for a line of other types, and while the clock holds one)
    assert called[3] == n and (own[3] <= n / 2 or n < 6), (own[3], n)


@needs_kernels
@pytest.mark.parametrize(
    "line, taken",
    [
        ("11/29/2026 10:00:15 step 1 \u2713", 1),  # wide past the stamp: read
        ("11/29/2026 10:00:\uff115 step 1", 0),  # a wide digit in the seconds: back
        ("11/29/2026 10:01:15 step 1", 0),  # another minute: back
        ("11/29/2026 10:00:65 step 1", 0),  # no second under 60: back
        ("11/29/2026 10:00:1", 0),  # shorter than the stamp: back
    ],
)
def test_in_order_reads_a_stamp_of_the_minute_held_and_hands_back_the_rest(line: str, taken: int) -> None:
    """The kernel on one lane line, its minute held: a line it stops at is
    left as it was (nothing appended, the state as given)."""
    lane = object()
    stamps: list[float] = []
    events: list[object] = []
    made = {id(lane): (stamps, iter(["event"]), len, 0, 1, [], None, None)}
    state = [lane, None, 0, 0.0, False, 0, "11/29/2026 10:00", 1000.0, False]
    given = list(state)

    def never(*args: object) -> None:
        raise AssertionError(f"no callback for a stamped line of the minute held: {args}")

    stop = native.KERNELS.in_order(  # type: ignore[union-attr]
        0, [lane], made, [line], [0], [len(line)], events, state, line, 0.0, never, never, never, None, None, 2.0,
    )
    assert stop == taken
    if taken:
        assert stamps == [1015.0] and events == ["event"] and state[1] == 1015.0 and state[5] == 1
    else:
        assert stamps == [] and events == [] and state == given


@needs_kernels
@pytest.mark.parametrize("seed", range(20))
def test_rank_numbers_reads_as_int_or_hands_back(seed: int) -> None:
    """``rank_numbers`` against ``_read_by_stretch``'s comprehension: the same
    ints where every rank is ASCII digits, else None (Python reads them)."""
    from dflash_watch.parsers.cursor import Ranked

    rng = random.Random(seed)
    lines: list[str] = ["x"] * rng.randrange(0, 3)  # lines before the stretch
    start = len(lines)
    prefixes: list[Ranked] = []
    for _ in range(rng.randrange(1, 30)):
        rank = rng.choice(("5", "63", "007", str(rng.randrange(10**6)), "1" * 18))
        if rng.random() < 0.08:
            rank = rng.choice(("\u0663", " 5", "5_0", "", "-1", "1" * 19, "a"))
        line = f"[rank{rank}]:11/29/2026 10:00:01 step 1 \u2588"
        lines.append(line)
        prefixes.append(Ranked(None, 7 + len(rank), 5, 5 + len(rank)))  # type: ignore[arg-type]
    got = native.KERNELS.rank_numbers(lines, start, prefixes)  # type: ignore[union-attr]
    try:
        want: list[int] | None = [int(line[p.rank_at : p.rank_end]) for line, p in zip(lines[start:], prefixes)]
    except ValueError:
        want = None
    plain = all(line[p.rank_at : p.rank_end].isascii() and line[p.rank_at : p.rank_end].isdigit()
                and len(line[p.rank_at : p.rank_end]) <= 18 for line, p in zip(lines[start:], prefixes))
    assert got == (want if plain else None)
    assert native.KERNELS.rank_numbers(lines, len(lines), prefixes) is None  # (past the lines: Python's)  # type: ignore[union-attr]


def _swap_reference(window: list[float], leaving: float, value: float) -> float:
    """``RankState._interval``'s slide in Python."""
    from bisect import bisect_left, insort

    del window[bisect_left(window, leaving)]
    insort(window, value)
    mid = len(window) // 2
    return (window[mid - 1] + window[mid]) / 2


@needs_kernels
@pytest.mark.parametrize("seed", range(60))
def test_window_swap_slides_as_bisect_and_insort(seed: int) -> None:
    rng = random.Random(seed)
    pool = [0.0, -0.0, 1.0, 1.0, 2.5, 3.0, math.inf, -math.inf, 1e308, 5e-324]
    size = rng.choice((2, 4, 16, 16, 64))
    window = sorted(rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-5, 5) for _ in range(size))
    leaving = rng.choice(window)
    value = rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-5, 5)
    mine, theirs = list(window), list(window)
    got = native.KERNELS.window_swap(mine, leaving, value)  # type: ignore[union-attr]
    want = _swap_reference(theirs, leaving, value)
    assert got == want or (math.isnan(got) and math.isnan(want))
    assert [math.copysign(1, x) for x in mine] == [math.copysign(1, x) for x in theirs]  # the same items
    assert mine == theirs
    if value in mine:
        assert any(x is value for x in mine)  # the item itself, not a copy


@needs_kernels
def test_window_swap_leaves_what_it_cannot_slide() -> None:
    swap = native.KERNELS.window_swap  # type: ignore[union-attr]
    window = [1.0, 2.0, 3.0, 4.0]
    for args in ((window, 9.0, 1.0), (window, 2.5, 1.0), (window, math.nan, 1.0), (window, 1.0, math.nan), (window, 1, 2.0),
                 ([1.0, 2.0, 3.0], 1.0, 2.0), ([], 1.0, 1.0), ([1.0, 2, 3.0, 4.0], 1.0, 2.0),
                 ([1.0, math.nan, 3.0, 4.0], 1.0, 2.0)):
        before = list(args[0])
        assert swap(*args) is None
        assert args[0] == before or (math.isnan(before[1]) and args[0][0] == 1.0)
    assert swap(window, 1.0, 5.0) == 3.5 and window == [2.0, 3.0, 4.0, 5.0]
    import sys

    gone, coming = float("7.25"), float("0.5")
    window = [1.0, 2.0, gone, 9.0]
    held = sys.getrefcount(gone), sys.getrefcount(coming)
    assert swap(window, 7.25, coming) == 1.5 and window[0] is coming
    assert (sys.getrefcount(gone), sys.getrefcount(coming)) == (held[0] - 1, held[1] + 1)


def _stall_case(rng: random.Random) -> tuple[list[object], tuple[object, ...]]:
    """A run of step lines and a walk's state, mostly of the kinds the
    kernel walks, now and then one it leaves to Python."""
    from dflash_watch.parsers.events import Progress

    def small() -> int | None:
        return rng.choice((None, 0, 1, 2, 5, 9, 10, 99, 100, -1))

    odd_kind = rng.random() < 0.15
    t = rng.uniform(0, 100)
    steps: list[object] = []
    step = rng.randrange(0, 20)
    for _ in range(rng.randrange(0, 30)):
        t += rng.choice((0.0, 0.5, 1.0, 3.0, 40.0, -0.2, -5.0))
        step += rng.choice((1, 1, 1, 0, -1, -8, 50))
        time: object = t if rng.random() > 0.03 else math.nan
        total = rng.choice((None, None, 100, step + 1, step, 0))
        rank = rng.choice((None, None, 0, 1, 3))
        secs = rng.choice((None, None, 0.5, 0.0, -1.0, math.nan))
        p = Progress(time, f"log:{len(steps)}", step=rng.choice((step, step, None)), total_steps=total,  # type: ignore[arg-type]
                     rank=rank, step_seconds=secs, clocked=rng.random() > 0.1)
        if odd_kind and rng.random() < 0.2:
            field = rng.choice(("time", "step", "rank", "total_steps", "step_seconds", "clocked"))
            object.__setattr__(p, field, rng.choice((2**70, 3, 1.5, "x", 0)))
        steps.append(p)
    bound = rng.choice((math.inf, t + 1.0, t - 50.0, rng.uniform(0, 200)))
    state = (bound, rng.choice((5.0, 30.0)), rng.choice((0.0, 2.0)), rng.random() < 0.8, small(),
             rng.choice((None, rng.uniform(0, 100))), rng.choice((None, 0, 10, 100)), rng.choice((None, 0, 2)),
             rng.choice((None, 0.7)), rng.choice((0, 0, 1)))
    if odd_kind and rng.random() < 0.3:
        at = rng.randrange(len(state))
        state = state[:at] + (rng.choice((1, "x", 2**70, None)),) + state[at + 1:]
    return steps, state


@needs_kernels
@pytest.mark.parametrize("seed", range(400))
def test_stall_walk_is_walk_steps(seed: int) -> None:
    from dflash_watch.detectors.stall import _FIELDS, walk_steps

    steps, state = _stall_case(random.Random(seed))
    got = native.KERNELS.stall_walk(steps, _FIELDS, *state)  # type: ignore[union-attr]
    if got is NotImplemented:
        return  # an odd kind somewhere: Python walks (the counts below check it is rare)
    want = walk_steps(steps, *state)  # type: ignore[arg-type]
    if want is None or got is None:
        assert got is want
        return
    assert got[0] == want[0] and got[1] is want[1], seed
    for a, b in zip(got[2:], want[2:]):
        assert a == b and type(a) is type(b), seed
    for i in (2, 3, 4, 5, 6):
        assert got[i] is want[i], (seed, i)  # the same objects: the lines' own, or the ones given


@needs_kernels
def test_stall_walk_leaves_odd_kinds_to_python_and_walks_the_rest() -> None:
    from dflash_watch.detectors.stall import _FIELDS

    walked = left = 0
    for seed in range(400):
        steps, state = _stall_case(random.Random(seed))
        got = native.KERNELS.stall_walk(steps, _FIELDS, *state)  # type: ignore[union-attr]
        left += got is NotImplemented
        walked += got is not NotImplemented
    assert walked > 300 and left > 10, (walked, left)
    from dflash_watch.parsers.events import Progress

    p = Progress(1.0, "x", step=1)
    assert native.KERNELS.stall_walk([p, 3], _FIELDS, math.inf, 5.0, 0.0, True, None, None, None, None,  # type: ignore[union-attr]
                                     None, 0) is NotImplemented
    assert native.KERNELS.stall_walk([p], _FIELDS, math.inf, 5.0, 0.0, True, 2**62, None, None, None,  # type: ignore[union-attr]
                                     None, 0) is NotImplemented


@needs_kernels
@pytest.mark.parametrize("seed", range(30))
def test_ascii_view_is_encode_replace(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["a", "?", "\n", "\r", "\x7f", "\x80", "\xe9", "\xff", "\u2588", "\u0663", "\ufffd", "\U0001f600",
                "\ud800"][: rng.randrange(4, 14)]
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))
    got = native.KERNELS.ascii_view(text)  # type: ignore[union-attr]
    assert got == text.encode("ascii", "replace").decode("ascii") and got.isascii() and len(got) == len(text)
    if text.isascii():
        assert got is text


@needs_kernels
@pytest.mark.parametrize("which", ["columns", "stall_walk"])
def test_a_collector_callback_that_empties_the_list_mid_call(which: str) -> None:
    """``columns`` and ``stall_walk`` hold the list's items first: a
    collection inside one of their allocations (or before the call) whose
    callback empties the caller's list crashes nothing; the answer is that
    of the list whole or emptied."""
    import gc

    from dflash_watch.detectors.stall import _FIELDS
    from dflash_watch.parsers.events import new_progress

    kernels = native.KERNELS
    assert kernels is not None
    for nth in (2, 3, 4, 5):
        steps = [new_progress(time=float(i), source=f"s{i}", step=i * 1_000_003) for i in range(1, 200)]
        want = [(p.time, p.step) for p in steps]
        left = [nth]

        def empty(phase: str, info: dict[str, int], steps: list[object] = steps, left: list[int] = left) -> None:
            if phase == "start" and left[0] > 0:
                left[0] -= 1
                if left[0] == 0:
                    steps.clear()

        fields = (_FIELDS[0], _FIELDS[1])
        before = gc.get_threshold()
        gc.collect()
        gc.callbacks.append(empty)
        gc.set_threshold(1)
        try:
            if which == "columns":
                got = kernels.columns(steps, fields)
            else:
                got = kernels.stall_walk(steps, _FIELDS, math.inf, 5.0, 2.0, True, None, None, None, None, None, 0)
        finally:
            gc.set_threshold(*before)
            gc.callbacks.remove(empty)
        if which == "columns":
            assert list(zip(*got)) in (want, [])
        elif got[1] is not None:
            assert got[1].time == want[-1][0] and got[2] == want[-1][1] and len(got[0]) == len(want) - 1
        else:
            assert got[0] == [] and got[2] is None  # emptied before the call


@needs_kernels
def test_metric_names_leaves_names_whose_hash_runs_python() -> None:
    """A str subclass's ``__hash__`` is Python code that may change the list
    under the loop: such names go to the set comprehension."""

    class Name(str):
        def __hash__(self) -> int:
            metrics.clear()
            return str.__hash__(self)

    metrics = [((Name("a"), 1.0),) + tuple((f"b{i}", 1.0) for i in range(1000))]
    assert native.KERNELS.metric_names(metrics) is None  # type: ignore[union-attr]


@needs_kernels
@pytest.mark.parametrize("seed", range(20))
def test_newlines_is_bytes_count(seed: int) -> None:
    """``LineSplitter``'s line count: ``newlines`` counts what
    ``bytes.count(b"\\n")`` counts, in bytes and bytearrays, newlines at
    either end, runs of them, none at all."""
    from dflash_watch.sources import lines

    rng = random.Random(seed)
    alphabet = [b"\n", b"\n\n", b"a", b"\r", b"\xe2\x96\x88", b"x" * rng.randrange(1, 300), b"\x00"]
    data = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 200)))
    kernels = native.KERNELS
    assert kernels is not None
    for buf in (data, bytearray(data), data[1:], data[:-1]):
        assert kernels.newlines(buf) == buf.count(b"\n")
        assert lines.newline_count(buf) == buf.count(b"\n")
    for view in (memoryview(data), memoryview(data)[::2], memoryview(data)[1::3]):  # strided: not contiguous
        assert kernels.newlines(view) == bytes(view).count(b"\n")  # type: ignore[arg-type]


def test_newline_count_without_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from dflash_watch.sources import lines

    monkeypatch.setattr(lines, "KERNELS", None)
    assert lines.newline_count(b"a\nb\n\n") == 3 and lines.newline_count(bytearray(b"")) == 0
    with pytest.raises(TypeError):
        native.KERNELS.newlines("a\n") if native.KERNELS is not None else b"".count("\n")  # type: ignore[arg-type]


def _python_groups(lines: list[str], lanes: list[object]) -> dict[int, tuple[object, list[str], list[bool]]]:
    """``lanes._groups``' picking as Python does it."""
    ids = [id(lane) for lane in lanes]
    out: dict[int, tuple[object, list[str], list[bool]]] = {}
    for lane in lanes:
        if type(lane) is not bytes and id(lane) not in out:
            picks = [i == id(lane) for i in ids]
            out[id(lane)] = (lane, [line for line, pick in zip(lines, picks) if pick], picks)
    return out


class _BytesLike(bytes):
    """A bytes subclass is a lane to ``_groups`` (only exact bytes is a plain line)."""


@needs_kernels
@pytest.mark.parametrize("seed", range(30))
def test_lane_groups_is_the_python_picking(seed: int) -> None:
    rng = random.Random(seed)
    kinds = rng.randrange(1, 20)  # past LANES_MAX (16) in some
    pool: list[object] = [types.SimpleNamespace(name=f"lane{j}") for j in range(kinds)]
    pool += [b"plain", b"other", _BytesLike(b"sub")][: rng.randrange(0, 4)]
    n = rng.randrange(0, 300)
    lanes = [rng.choice(pool) for _ in range(n)]
    lines = [f"line {i}" for i in range(n)]
    kernels = native.KERNELS
    assert kernels is not None
    got = kernels.lane_groups(lines, lanes)
    want = _python_groups(lines, lanes)
    if len(want) > 16:
        assert got is None
        return
    assert got is not None
    assert list(got) == list(want)  # the order first seen
    for key, (lane, picked, picks) in got.items():
        assert lane is want[key][0] and picked == want[key][1] and picks == want[key][2]
        assert all(type(p) is bool for p in picks)
    # And ``_groups`` itself gives the same groups either way.
    assert kernels.lane_groups(lines, lanes[:-1] if lanes else [b"x"]) is None  # lengths differ
    assert kernels.lane_groups(tuple(lines), lanes) is None  # type: ignore[arg-type]


@needs_kernels
def test_groups_are_the_same_with_and_without_the_kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``lanes._groups`` on the runs of lanes of a real read (issue 20's
    progress log: step lines, tqdm bars, redrawn bars): the same groups,
    columns and picks with the kernel and without."""
    import sys

    from dflash_watch.parsers import lanes as lanes_module
    from dflash_watch.replay import log_events

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from speed_logs import write_log
    finally:
        sys.path.pop(0)
    seen: list[tuple[list[str], list[object]]] = []
    real = lanes_module._groups

    def spy(lines: list[str], lanes: list[object]) -> dict[int, list[object]]:
        seen.append((list(lines), list(lanes)))
        return real(lines, lanes)  # type: ignore[arg-type]

    path = tmp_path / "progress.log"
    write_log(path, 20000, "progress")
    monkeypatch.setattr(lanes_module, "_groups", spy)
    list(log_events(str(path)))
    monkeypatch.setattr(lanes_module, "_groups", real)
    assert len(seen) > 5 and max(len({id(lane) for lane in lanes}) for _, lanes in seen) >= 2
    for lines, lanes in seen:
        fast = real(lines, lanes)  # type: ignore[arg-type]
        monkeypatch.setattr(lanes_module, "KERNELS", None)
        slow = real(lines, lanes)  # type: ignore[arg-type]
        monkeypatch.setattr(lanes_module, "KERNELS", native.KERNELS)
        assert list(fast) == list(slow)
        for key in fast:
            assert repr(fast[key]) == repr(slow[key])


@needs_kernels
def test_lane_groups_under_a_collector_callback_that_empties_the_lists() -> None:
    """A collection inside ``lane_groups``' allocations whose callback
    empties the caller's lists: no crash, and the answer is None (it reads
    the lists again after allocating) or that of the lists whole."""
    import gc

    kernels = native.KERNELS
    assert kernels is not None
    for nth, reverse in itertools.product((1, 2, 3, 4), (False, True)):
        hold = [[] for _ in range(100)]  # the list free list emptied: ``PyList_New`` allocates
        pool = [types.SimpleNamespace(k=j) for j in range(3)]
        lanes: list[object] = [pool[i % 3] if i % 5 else b"plain" for i in range(200)]
        lines = [f"line {i}" for i in range(200)]
        want = _python_groups(lines, lanes)
        del pool
        left = [nth]

        def empty(phase: str, info: dict[str, int], lanes: list[object] = lanes, lines: list[str] = lines,
                  left: list[int] = left, reverse: bool = reverse) -> None:
            if phase == "start" and left[0] > 0:
                left[0] -= 1
                if left[0] == 0:
                    if reverse:  # the same lanes and counts, met in another order
                        lanes.reverse()
                        lines.reverse()
                    else:
                        lanes.clear()
                        lines.clear()

        before = gc.get_threshold()
        gc.collect()
        gc.callbacks.append(empty)
        gc.set_threshold(1)
        try:
            got = kernels.lane_groups(lines, lanes)
        finally:
            gc.set_threshold(*before)
            gc.callbacks.remove(empty)
        del hold
        # None, or the answer for the lists whole (before) or as changed (after).
        after = _python_groups(lines, lanes)
        assert got is None or [(k, v[1], v[2]) for k, v in got.items()] in (
            [(k, v[1], v[2]) for k, v in want.items()], [(k, v[1], v[2]) for k, v in after.items()])


@needs_kernels
@pytest.mark.parametrize("seed", range(30))
def test_sources_are_prefix_and_number(seed: int) -> None:
    """``lanes._sources``: ``prefix + str(number)`` of the numbers picked in
    ``numbers[lo:hi]``, the same strings as Python makes (ASCII, exact)."""
    from itertools import compress

    from dflash_watch.parsers import lanes as lanes_module

    rng = random.Random(seed)
    n = rng.randrange(0, 200)
    numbers = [rng.choice([0, 1, 9, 10, rng.randrange(10**6), rng.randrange(2**62), 2**63 - 1]) for _ in range(n)]
    picks = [rng.random() < 0.6 for _ in range(n)]
    lo = rng.randrange(0, n + 1)
    hi = rng.randrange(lo, n + 1)
    prefix = rng.choice(["train.log:", "", "/runs/a b/x.log:", "[rank3]:"])
    kernels = native.KERNELS
    assert kernels is not None
    for chosen in (picks, None):
        got = kernels.sources(prefix, numbers, lo, hi, chosen)
        want = [prefix + str(v) for v in (numbers[lo:hi] if chosen is None else compress(numbers[lo:hi], picks[lo:hi]))]
        assert got == want
        assert all(type(s) is str and s.isascii() for s in got)  # type: ignore[union-attr]
        assert list(lanes_module._sources(prefix, numbers, lo, hi, chosen)) == want


@needs_kernels
def test_what_sources_leaves_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    from dflash_watch.parsers import lanes as lanes_module

    kernels = native.KERNELS
    assert kernels is not None
    for prefix, numbers, picks in (
        ("träin.log:", [1, 2], None),  # a prefix outside ASCII
        ("a:", [1, -2], None),  # a negative number
        ("a:", [1, 2**64], None),  # past 64 bits
        ("a:", [1, 2.0], None),  # not an int
        ("a:", [1, True], None),  # not exactly an int
        ("a:", [1, 2], [True, 1]),  # not exactly a bool
        ("a:", [1, 2], [True]),  # lengths differ
    ):
        assert kernels.sources(prefix, numbers, 0, len(numbers), picks) is None
        # ``_sources`` then makes them in Python: the same strings.
        want = [prefix + str(v) for v, pick in zip(numbers, picks or [True] * 2) if pick]
        if len(picks or numbers) == len(numbers):
            assert list(lanes_module._sources(prefix, numbers, 0, len(numbers), picks)) == want
    assert kernels.sources("a:", [1, 2], 0, 3, None) is None  # past the end
    assert kernels.sources("a:", [1, 2], 2, 1, None) is None
    assert kernels.sources("a:", (1, 2), 0, 2, None) is None  # type: ignore[arg-type]
    # A number not picked is not read.
    assert kernels.sources("a:", [1, -5, 3], 0, 3, [True, False, True]) == ["a:1", "a:3"]
    monkeypatch.setattr(lanes_module, "KERNELS", None)
    assert list(lanes_module._sources("a:", [7, 8, 9], 1, 3, [True, False, True])) == ["a:9"]


def _walk_both(monkeypatch: pytest.MonkeyPatch, points: list[tuple[float, float]], times: list[float],
               smoothed: list[float], since: float | None, count: int, span: float) -> tuple[object, object]:
    """``loss_steps._walk_margin`` with the kernel and in Python, on a
    detector whose sliding minimum holds ``points``."""
    from collections import deque

    from dflash_watch.detectors.config import DetectorConfig
    from dflash_watch.detectors.loss import LossDetector

    def one() -> object:
        det = LossDetector(DetectorConfig())
        det._min.span_s = span
        det._min._points = deque(points)
        det._above_since, det._above_reports = since, count
        run = loss_steps._walk_margin(det, [], list(smoothed), list(times))
        if run is None:
            return None
        return [repr(x) for x in (run.smoothed, run.recent_min, run.lo, run.hi, run.new, run.above_since,
                                  run.above_reports)]

    fast = one()
    with monkeypatch.context() as m:
        m.setattr(loss_steps, "KERNELS", None)
        plain = one()
    return fast, plain


@needs_kernels
@pytest.mark.parametrize("seed", range(60))
def test_margin_walk_is_the_python_walk(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    pool = [0.0, -0.0, 1.0, 1.2, 1.21, 2.0, 1e-12, math.inf, -math.inf, math.nan] if seed % 3 == 0 else None

    def value() -> float:
        return rng.choice(pool) if pool is not None and rng.random() < 0.3 else rng.uniform(0.5, 3.0)

    t = 1000.0
    points = []
    for _ in range(rng.randrange(0, 12)):
        t += rng.uniform(0.0, 5.0)
        points.append((t, value()))
    times, smoothed = [], []
    for _ in range(rng.randrange(1, 80)):
        t += rng.choice([0.0, 0.5, 1.0, 7.0, -1.0])
        times.append(t if rng.random() > 0.02 else math.nan)
        smoothed.append(value())
    since = rng.choice([None, None, t - 100.0, times[0]])
    count = rng.choice([0, 0, 3, 10**6])
    fast, plain = _walk_both(monkeypatch, points, times, smoothed, since, count, rng.choice([10.0, 60.0, 600.0]))
    assert fast == plain


@needs_kernels
def test_margin_walk_leaves_odd_kinds_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = native.KERNELS
    assert kernels is not None
    ok = ([(1.0, 2.0)], [2.0], [2.5], 60.0, 0.2, 30.0, 5, None, 0)
    assert kernels.margin_walk(*ok) is not NotImplemented
    for i, odd in ((0, [(1.0, 2)]), (0, [(1.0, 2.0, 3.0)]), (1, [2]), (2, [True]), (7, 1), (8, 2**70), (6, 2**70),
                   (8, -1), (3, 60), (2, [2.5, 3.0])):
        args = list(ok)
        args[i] = odd
        assert kernels.margin_walk(*args) is NotImplemented
    # With an int among the smoothed losses, ``_walk_margin`` walks in Python: the same answer.
    fast, plain = _walk_both(monkeypatch, [(1.0, 2.0)], [2.0, 3.0], [2.5, 3], None, 0, 60.0)
    assert fast == plain


@needs_kernels
def test_margin_walk_at_its_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value exactly at the bound (quiet: ``<=``, with the 1e-12), one
    just above it; a rise that lasts exactly the seconds it needs (``<``:
    it fires) and one report short; a first add to an empty minimum (no
    minimum read: None)."""
    from dflash_watch.detectors.config import DetectorConfig

    c = DetectorConfig()
    ref = 2.0
    bound = ref + c.loss_divergence_margin * abs(ref) + 1e-12
    above = math.nextafter(bound, math.inf)
    cases = [
        ([(0.0, ref)], [1.0], [bound], None, 0),
        ([(0.0, ref)], [1.0], [above], None, 0),
        ([(0.0, ref)], [1.0], [ref + c.loss_divergence_margin * abs(ref)], None, 0),
        ([], [1.0], [3.0], None, 0),
        ([(0.0, ref)], [float(100 + i) for i in range(c.loss_divergence_min_reports)], [above * 1.5] * c.loss_divergence_min_reports,
         100.0 - c.loss_divergence_s + 0.0, 0),
        ([(0.0, ref)], [100.0, 100.0 + c.loss_divergence_s], [above * 1.5] * 2, 100.0, c.loss_divergence_min_reports),
        ([(0.0, ref)], [100.0, math.nextafter(100.0 + c.loss_divergence_s, 0.0)], [above * 1.5] * 2, 100.0,
         c.loss_divergence_min_reports),
    ]
    answers = []
    for points, times, smoothed, since, count in cases:
        fast, plain = _walk_both(monkeypatch, points, times, smoothed, since, count, 3600.0)
        assert fast == plain
        answers.append(fast)
    assert answers[0][-2:] == ["None", "0"] and answers[1][-2:] == ["1.0", "1"]  # type: ignore[index]
    assert answers[3][1] == "None"  # type: ignore[index]
    assert answers[5] is None and answers[6] is not None  # fires at exactly the seconds, not a hair before


@needs_kernels
def test_stream_tails_after_another_class_is_registered() -> None:
    """``stream_tails`` finds the places of source, step and time again
    after ``set_progress`` registers another class (the test above does):
    it reads that class's own slots, not ``Progress``'s (past a smaller
    object's end)."""
    from collections import deque

    from dflash_watch.parsers import events
    from dflash_watch.parsers.events import Progress

    kernels = native.KERNELS
    assert kernels is not None
    first = {0: deque(), 1: deque()}  # type: ignore[var-annotated]
    assert kernels.stream_tails([Progress(0.0, "f:1", step=0, rank=0), Progress(0.0, "f:2", step=1, rank=1)], [0, 1],
                                first, 2, 16)

    class Other:
        __slots__ = ("source", "time", "step")  # the same names, another layout, a smaller object

    kernels.set_progress(Other, ("source", "time", "step"), (Other.source, Other.time, Other.step), (None, None, None),
                         3)
    try:
        lines = []
        for source, time, step in (("f:7", 12.0, 3), ("f:8", 99.0, 4)):
            o = Other()
            o.source, o.time, o.step = source, time, step
            lines.append(o)
        got = {0: deque(), 1: deque()}  # type: ignore[var-annotated]
        assert kernels.stream_tails(lines, [0, 1], got, 2, 16)
        assert {k: list(v) for k, v in got.items()} == {0: [(7, 3, 12.0)], 1: [(8, 4, 99.0)]}
    finally:
        events._compiled_builder()  # Progress again, for every later test


@needs_kernels
def test_stream_tails_when_a_rank_s_hash_drops_its_stream() -> None:
    """A rank whose ``__hash__`` empties the streams while ``stream_tails``
    indexes them (ranks are ints in a log; any hashable here): the deque is
    held, nothing is freed under it, and the answer is None or done."""
    import gc
    from collections import deque

    from dflash_watch.parsers.events import Progress

    kernels = native.KERNELS
    assert kernels is not None
    streams: dict[object, deque[tuple[int, int, float]]] = {}

    class Rank:
        armed = False

        def __hash__(self) -> int:
            if Rank.armed:
                Rank.armed = False
                streams.clear()  # the deque's and the key's last references
            return 1

        def __eq__(self, other: object) -> bool:
            return self is other

    rank = Rank()
    streams[rank] = deque([(1, 2, 3.0)] * 3, maxlen=16)
    ranks = [rank]
    del rank
    Rank.armed = True
    for _ in range(3):
        assert kernels.stream_tails([Progress(0.0, "f:1", step=0, rank=None)], ranks, streams, 2, 16) in (None, True)
        gc.collect()


@needs_kernels
def test_ascii_bytes_is_the_str_s_own_bytes_kept_alive_read_only() -> None:
    """``ascii_bytes``: the bytes ``encode("ascii")`` gives, no copy, the
    str kept alive by the view (its name gone, the view still reads it),
    never writable; a str outside ASCII, a subclass or no str refused."""
    import gc

    text = "".join(f"line {i} tok/s\n" for i in range(1000))
    want = text.encode("ascii")
    view = native.KERNELS.ascii_bytes(text)  # type: ignore[union-attr]
    del text
    gc.collect()
    assert bytes(view) == want and view.readonly and len(view) == len(want)
    assert view[-1:] == b"\n" and bytes(view[5:9]) == want[5:9]
    with pytest.raises(TypeError):
        view[0] = 65
    for bad, error in (("caf\u00e9\n", ValueError), (type("S", (str,), {})("x"), ValueError), (b"x", TypeError)):
        with pytest.raises(error):
            native.KERNELS.ascii_bytes(bad)  # type: ignore[union-attr,arg-type]


@needs_kernels
@pytest.mark.parametrize("text", ["a Traceback here\nnothing\nloss 2.0 tok/s 3\n", "no newline at the end tok/s", ""])
def test_hyperscan_finds_the_same_lines_in_the_str_s_own_bytes(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanner over ``ascii_bytes`` and over ``encode("ascii")`` (no
    kernels): the same line ends, a last line without its newline too."""
    pytest.importorskip("hyperscan")
    from dflash_watch.parsers import scanner as scanner_module

    literals = ["Traceback", "tok/s", "loss"]
    own = scanner_module.make_scanner(literals, engine="hyperscan").ends(text)
    monkeypatch.setattr(scanner_module, "KERNELS", None)
    copied = scanner_module.make_scanner(literals, engine="hyperscan").ends(text)
    assert own == copied == scanner_module.make_scanner(literals, engine="re").ends(text)


# Pieces of UTF-8 and of what is not: utf8_text must give Python's str
# wherever it gives one, and give none exactly where its fast path ends.
_UTF8_PIECES = [
    b"a", b"step 12 | loss 2.0\n", b"x" * 7, b"y" * 15, b"z" * 17, b"\r", b"\x00", b"\x7f",
    "é".encode(), "ß".encode(), "Ω".encode(), "߿".encode(),  # two bytes: Latin-1, past it, the last
    "█".encode(), "€".encode(), "\ufffd".encode(), "\uffff".encode(), "\ue000".encode(), "\u0800".encode(),
    "\ud7ff".encode(),  # the last before the surrogates
    "😀".encode(), "\U0010ffff".encode(),  # four bytes
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xe2\x96", b"\xc3", b"\xe2", b"\xf0\x9f\x98",
]


def _utf8_fast_case(data: bytes) -> bool:
    """Whether ``utf8_text`` should decode ``data`` itself: valid UTF-8,
    ASCII or with a widest character past Latin-1 within the BMP."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    widest = max(map(ord, text), default=0)
    return widest < 0x80 or 0xFF < widest <= 0xFFFF


@needs_kernels
@pytest.mark.parametrize("seed", range(30))
def test_utf8_text_is_pythons_decode_or_none(seed: int) -> None:
    import sys

    rng = random.Random(seed)
    kernels = native.KERNELS
    assert kernels is not None
    for _ in range(300):
        weights = [rng.random() for _ in _UTF8_PIECES]
        data = b"".join(rng.choices(_UTF8_PIECES, weights, k=rng.randrange(0, 40)))
        expected = str(data, "utf-8", "replace")
        for buf in (data, bytearray(data)):
            text = kernels.utf8_text(buf)
            assert (text is not None) == _utf8_fast_case(data), data
            if text is not None:
                assert text == expected and type(text) is str
                assert sys.getsizeof(text) == sys.getsizeof(expected)  # the same kind (width) of str


@needs_kernels
def test_utf8_text_at_every_offset_of_its_wide_steps() -> None:
    """A wide character at each offset of runs that cross the 8- and 16-byte steps."""
    kernels = native.KERNELS
    assert kernels is not None
    for length in range(0, 41):
        for at in range(length + 1):
            for wide in ("█", "Ω", "é█", "██", "\ufffd"):
                data = (b"a" * at + wide.encode() + b"b" * (length - at))
                text = kernels.utf8_text(data)
                assert text == data.decode("utf-8"), (length, at, wide)
            ascii_only = b"c" * length
            assert kernels.utf8_text(ascii_only) == ascii_only.decode("ascii")
            assert kernels.utf8_text(b"a" * at + b"\xe2\x96" + b"b" * (length - at)) is None  # cut short


def test_decoded_is_pythons_decode_with_or_without_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from dflash_watch.sources import lines

    samples = [b"", b"plain\n", "Training: 10%|█ | 5/50\n".encode(), b"bad \xff byte\n", "é only\n".encode(),
               "emoji 😀\n".encode(), b"cut \xe2\x96"]
    for kernels in (native.KERNELS, None):
        monkeypatch.setattr(lines, "KERNELS", kernels)
        for data in samples:
            for buf in (data, bytearray(data)):
                assert lines.decoded(buf) == str(data, "utf-8", "replace")


@needs_kernels
def test_match_end_appends_the_newline_of_each_match() -> None:
    kernels = native.KERNELS
    assert kernels is not None
    ends: list[int] = []
    assert kernels.match_end(0, 0, 18, 0, ends) is None
    kernels.match_end(3, 5, 1, 0, ends)
    kernels.match_end(0, 0, 2**40, 0, ends)
    assert ends == [17, 0, 2**40 - 1]
    for bad in ((0, 0, 1, 0, ()), (0, 0, 1, 0), (0, 0, 1, 0, [], 9), (0, 0, "1", 0, [])):
        with pytest.raises(TypeError):
            kernels.match_end(*bad)  # type: ignore[arg-type]
    assert ends == [17, 0, 2**40 - 1]  # nothing appended by a refused call


def _rank_states(rng: random.Random, n: int) -> list[object]:
    """RankStates with the hang rules' four fields drawn from the values that
    matter: None, zeros of both signs, NaN, infinities, ties and plain times."""
    from dflash_watch.detectors.straggler_ranks import RankState

    times = [None, 0.0, -0.0, math.nan, math.inf, -math.inf, 5.0, 5.0, 100.5, 1e9, -3.0]
    states = []
    for r in range(n):
        s = RankState(r, 0.0)
        s.last_step = rng.choice([None, 0, 3, 10**30])
        s.last_step_time = rng.choice(times + [rng.uniform(-10, 200)])
        s.usual_s = rng.choice([None, 0.0, -0.0, -1.0, math.nan, 0.5, 2.0, 2.0, rng.uniform(0, 50)])
        s.last_seen = rng.choice(times + [rng.uniform(-10, 200)])
        states.append(s)
    return states


def _same(a: object, b: object) -> bool:
    """Equal, NaN to NaN, and zeros of the same sign."""
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    return a == b and type(a) is type(b)


@needs_kernels
@pytest.mark.parametrize("seed", range(40))
def test_hung_pass_and_floor_are_the_python_passes(seed: int) -> None:
    from dflash_watch.detectors import straggler_hung

    kernels = native.KERNELS
    assert kernels is not None
    rng = random.Random(seed)
    for _ in range(60):
        ranks = _rank_states(rng, rng.randrange(0, 9))
        floor, factor = rng.choice([60.0, 0.0, 1.5, math.inf]), rng.choice([5.0, 0.0, 0.1, math.nan])
        now = rng.choice([0.0, -0.0, 50.0, 150.0, math.nan, rng.uniform(-10, 300)])
        fast = kernels.hung_pass(ranks, floor, factor, now)
        assert fast is not None
        assert _same(fast, straggler_hung._pass(ranks, floor, factor, now)), (ranks, floor, factor, now)  # type: ignore[arg-type]
        since = rng.choice([math.inf, 0.0, -0.0, 40.0, math.nan, rng.uniform(-10, 300)])
        found = kernels.hung_floor(ranks, since)
        assert found is not None
        saved = straggler_hung.KERNELS
        try:
            straggler_hung.KERNELS = None  # type: ignore[assignment]
            expected = straggler_hung.quiet_floor(ranks, since)  # type: ignore[arg-type]
        finally:
            straggler_hung.KERNELS = saved  # type: ignore[assignment]
        assert _same(found, expected), (ranks, since)
        assert _same(kernels.hung_floor(dict(enumerate(ranks)).values(), since), expected)  # the dict's values
        assert _same(kernels.hung_floor(tuple(ranks), since), expected)
        assert kernels.hung_floor(iter(ranks), since) is None  # one-shot: Python could not read it again


@needs_kernels
def test_hung_pass_and_floor_leave_other_kinds_to_python() -> None:
    from dflash_watch.detectors.straggler_ranks import RankState

    kernels = native.KERNELS
    assert kernels is not None
    good = RankState(0, 0.0)
    good.last_step, good.last_step_time, good.usual_s, good.last_seen = 1, 5.0, 2.0, 5.0
    assert kernels.hung_pass([good, good], 60.0, 5.0, 1.0) == (2, 5.0, 2.0, 65.0)  # 5 + max(60, 5 * 2)
    assert kernels.hung_floor([good], 40.0) == 5.0
    for field, value in (("last_step_time", 5), ("usual_s", 2), ("last_seen", True)):
        odd = RankState(1, 0.0)
        odd.last_step, odd.last_step_time, odd.usual_s, odd.last_seen = 1, 5.0, 2.0, 5.0
        setattr(odd, field, value)  # an int where a float is read: Python's to compare
        assert kernels.hung_pass([good, odd], 60.0, 5.0, 1.0) is None, field
        assert kernels.hung_floor([good, odd], 40.0) is None, field

    class Sub(RankState):
        __slots__ = ()

    assert kernels.hung_pass([good, Sub(2, 0.0)], 60.0, 5.0, 1.0) is None
    assert kernels.hung_floor((good, "not a rank"), 40.0) is None
    # A one-shot iterable is Python's from the start: declined part-way, the
    # rest alone would be read (a review's find: 100.0 instead of 1.0).
    a, b = RankState(3, 0.0), RankState(4, 0.0)
    a.last_step, a.last_step_time, a.usual_s, a.last_seen = 1, 5.0, 1.0, 5.0
    b.last_step, b.last_step_time, b.usual_s, b.last_seen = 1, 9.0, 2, 1.0
    from dflash_watch.detectors.straggler_hung import quiet_floor

    assert quiet_floor([a, b], 100.0) == quiet_floor((x for x in [a, b]), 100.0) == 1.0
    assert kernels.hung_pass((good,), 60.0, 5.0, 1.0) is None  # a tuple, not the list it is given
    for figures in ((60, 5.0, 1.0), (60.0, 5, 1.0), (60.0, 5.0, 1)):
        assert kernels.hung_pass([good], *figures) is None
    assert kernels.hung_floor([good], 40) is None
    with pytest.raises(TypeError):
        kernels.hung_pass([good], 60.0, 5.0)  # type: ignore[call-arg]
    assert kernels.hung_floor(5, 40.0) is None  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kernels.hung_floor([good])  # type: ignore[call-arg]


def test_next_deadline_and_quiet_floor_with_and_without_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from dflash_watch.detectors import straggler_hung
    from dflash_watch.detectors.config import DetectorConfig

    config = DetectorConfig()
    rng = random.Random(7)
    cases = [(_rank_states(rng, rng.randrange(0, 9)), rng.choice([False, True]), rng.uniform(-10, 300),
              rng.choice([math.inf, rng.uniform(-10, 300)])) for _ in range(300)]
    calls: list[str] = []
    if native.KERNELS is not None:  # the kernels are what the rules call where built
        real = native.KERNELS

        def hung_pass(*args: object) -> object:
            calls.append("pass")
            return real.hung_pass(*args)  # type: ignore[arg-type]

        def hung_floor(*args: object) -> object:
            calls.append("floor")
            return real.hung_floor(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(straggler_hung, "_HUNG_PASS", hung_pass)
        monkeypatch.setattr(straggler_hung, "KERNELS", types.SimpleNamespace(hung_floor=hung_floor))
    with_kernels = [(straggler_hung.next_deadline(r, config, p, now), straggler_hung.quiet_floor(r, since))
                    for r, p, now, since in cases]  # type: ignore[arg-type]
    if native.KERNELS is not None:
        assert calls.count("pass") == calls.count("floor") == len(cases)
    monkeypatch.setattr(straggler_hung, "_HUNG_PASS", None)
    monkeypatch.setattr(straggler_hung, "KERNELS", None)
    without = [(straggler_hung.next_deadline(r, config, p, now), straggler_hung.quiet_floor(r, since))
               for r, p, now, since in cases]  # type: ignore[arg-type]
    assert all(map(_same, with_kernels, without))
    assert sum(d is not None for d, _ in without) > 30  # deadlines found, not only None
