"""``parsers.padding.may_state_padding`` says what ``padding_from_metrics`` would (issue 20).

The padding detector asks, for the names of a whole run of step lines at
once, whether their numbers can state padding, and takes the run as quiet
when they cannot, without reading each line's numbers. That is exact only
if the lookup never says False where ``padding_from_metrics`` could give a
value: compared here on every metric-name shape the fixtures and the shared
real-world logs print, on every padding key in its forms (``train/``
prefixes, upper case), and on random names; with the caches empty (a name
not seen yet is classified there) and full (the test in C). The detector's
answer for a run is compared with the line-by-line one
(tests/core/test_quiet_steps_simple.py compares its alerts).
"""

from __future__ import annotations

import random
from datetime import UTC
from pathlib import Path

import pytest

import dflash_watch.parsers.padding as padding_module
from dflash_watch.detectors.padding import PaddingDetector
from dflash_watch.parsers.events import Progress
from dflash_watch.parsers.padding import (
    EFFICIENCY_KEYS,
    PAD_COUNT_KEYS,
    RATIO_KEYS,
    TOKEN_COUNT_KEYS,
    may_state_padding,
    padding_from_metrics,
)
from dflash_watch.parsers.stream import LogStream

ROOT = Path(__file__).resolve().parents[2]
REALWORLD = ROOT.parent / "shared" / "realworld"


def _log_paths() -> list[Path]:
    paths = [p for p in (ROOT / "tests" / "fixtures").rglob("*") if p.suffix in (".log", ".txt") and p.is_file()]
    if REALWORLD.is_dir():  # the shared logs, where this checkout has them
        paths += sorted(REALWORLD.glob("*.log"))
    return sorted(paths)


# Progress lines that state padding (no fixture prints one in a progress line).
PADDING_LINES = """\
2026-11-29 10:00:01 - INFO - __main__ - step 5/100 | loss 2.3 | pad_eff 0.93 | 21.1 Ktok/s
{'loss': 2.31, 'grad_norm': 0.7, 'learning_rate': 0.0001, 'padding_efficiency': 0.93, 'epoch': 0.5}
{'loss': 2.31, 'train/padding_ratio': 0.07, 'epoch': 0.5}
{'loss': 2.31, 'num_padding_tokens': 100.0, 'num_input_tokens_seen': 4000.0, 'epoch': 0.5}
{'loss': 2.31, 'num_input_tokens_seen': 4000.0, 'epoch': 0.5}
step 7/100 | loss 2.3 | padding_efficiency 93.1% | lr 3e-4
"""


def _shapes_of(name: str, text: str) -> set[tuple[str, ...]]:
    stream = LogStream(name, tz=UTC, replay=True)
    if not text.endswith("\n"):
        text += "\n"
    events = stream.feed(text, 1, 0.0) + stream.flush(0.0)
    return {tuple(key for key, _ in e.metrics) for e in events if type(e) is Progress}


def _log_shapes() -> set[tuple[str, ...]]:
    """Every tuple of metric names a progress event of these logs carries."""
    shapes = _shapes_of("padding.log", PADDING_LINES)
    for path in _log_paths():
        shapes |= _shapes_of(path.name, path.read_text(encoding="utf-8", errors="replace"))
    return shapes


LOG_SHAPES = sorted(_log_shapes())
KEYS = sorted(EFFICIENCY_KEYS | RATIO_KEYS | PAD_COUNT_KEYS | TOKEN_COUNT_KEYS)
OTHERS = ["lr", "loss", "grad_norm", "epoch", "acc", "tok/s", "padding_side", "pad", "tokens_per_s", "padded",
          "num_tokens_x", "eval/pad_eff_x", "tokenz", "PAD_EFF ", ""]


def _random_shapes(seed: int, count: int) -> list[tuple[str, ...]]:
    rnd = random.Random(seed)
    alphabet = "abdeiklnoprstu_/"
    shapes = []
    for _ in range(count):
        names = []
        for _ in range(rnd.randrange(6)):
            r = rnd.random()
            if r < 0.35:
                name = rnd.choice(KEYS)
                name = rnd.choice(["", "train/", "eval/", "a/b/"]) + rnd.choice([name, name.upper(), name.title()])
            elif r < 0.6:
                name = rnd.choice(OTHERS)
            else:
                name = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 12)))
            names.append(name)
        shapes.append(tuple(names))
    return shapes


def _can_state(names: tuple[str, ...]) -> bool:
    """The plain answer: numbers under these names that state padding (an
    efficiency or ratio of 0.5; a padding count and a token count alike: 0)."""
    return padding_from_metrics(tuple((name, 0.5) for name in names)) is not None


def _empty_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(padding_module, "_KIND", {})
    monkeypatch.setattr(padding_module, "_NOT_PADDING", set())


def _shapes() -> list[tuple[str, ...]]:
    keyed = [(key,) for key in KEYS] + [(pad, tok) for pad in PAD_COUNT_KEYS for tok in TOKEN_COUNT_KEYS]
    return LOG_SHAPES + keyed + [("lr",) + shape for shape in keyed] + _random_shapes(7, 3000)


def test_the_logs_have_shapes_of_both_kinds() -> None:
    """Names that state padding (``PADDING_LINES``) and names that do not
    (the fixtures and shared logs: none prints padding in a progress line)."""
    assert len(LOG_SHAPES) > 20
    assert sum(_can_state(shape) for shape in LOG_SHAPES) >= 4
    assert sum(not _can_state(shape) for shape in LOG_SHAPES) > 20
    assert ("num_input_tokens_seen", "epoch") in LOG_SHAPES  # a token count alone: none


@pytest.mark.parametrize("cache", ["empty", "full"])
def test_the_lookup_agrees_with_padding_from_metrics(cache: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = _shapes()
    _empty_caches(monkeypatch)
    if cache == "full":  # every name seen: the test in C answers for those that cannot
        for shape in shapes:
            padding_from_metrics(tuple((name, 1.0) for name in shape))
            may_state_padding(shape)
    for shape in shapes:
        assert may_state_padding(shape) == _can_state(shape), shape
    # Asked again, once every name is known.
    for shape in shapes:
        assert may_state_padding(shape) == _can_state(shape), shape


def test_names_that_cannot_state_padding_never_do_whatever_the_numbers() -> None:
    rnd = random.Random(3)
    values = [0.0, 0.5, 1.0, 93.1, 1e6, -1.0, float("nan"), float("inf")]
    for shape in _shapes():
        if may_state_padding(shape):
            continue
        for _ in range(5):
            metrics = tuple((name, rnd.choice(values)) for name in shape)
            assert padding_from_metrics(metrics) is None, metrics


def test_a_run_is_quiet_exactly_when_no_line_states_padding() -> None:
    """``PaddingDetector.quiet_steps`` of a run (its names asked at once)
    against its lines read one by one: refused exactly when one states it."""
    rnd = random.Random(11)
    shapes = _shapes()
    refused = quiet = 0
    for n in range(600):
        steps = []
        for i in range(rnd.randrange(1, 12)):
            shape = rnd.choice(shapes) if rnd.random() < 0.3 else rnd.choice(LOG_SHAPES)
            metrics = tuple((name, rnd.choice([0.5, 0.9, 2.0, 40.0])) for name in shape)
            steps.append(Progress(1000.0 + n + i / 100, f"x:{n}", step=i, metrics=metrics))
        states = any(padding_from_metrics(p.metrics) is not None for p in steps)
        answer = PaddingDetector().quiet_steps(steps)
        assert (answer is None) == states
        refused += states
        quiet += not states
    assert refused > 50 and quiet > 50
