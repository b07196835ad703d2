"""Live == replay: the live path reads a log as replay does.

For every log fixture and every shared real-world log, the alerts
(detector, kind, gpu, state) of the live path, through the real tailer
threads of ``LiveSession``, must equal replay's:

* with the file complete before the session starts (attaching to a run
  whose log already holds its history), and
* with the same bytes appended in bursts of 4-64 KB while it runs (block
  buffered output: bursts cut lines anywhere and carry older timestamps).

The live clock follows the data and is held still at it (``speed=0``):
what is compared is what was read, not the silence a wall clock adds after
the data ends (the stall tests judge that). When the log has gone quiet the
session is stopped as headless stops on SIGTERM: what is pending is sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_watch.replay import replay
from tests.shell.live_read import REALWORLD, fixture_logs, read_live


def _key(alert) -> tuple:  # noqa: ANN001
    return (alert.detector, alert.kind, alert.gpu, alert.state)


def _replayed(log: Path) -> list[tuple]:
    return [_key(a) for a in replay([str(log)]).alerts]


def _live(log: Path, target: Path, *, bursts: bool, seed: int = 0) -> list[tuple]:
    return [_key(a) for a in read_live(log, target, bursts=bursts, seed=seed)]


@pytest.mark.slow
@pytest.mark.parametrize("log", fixture_logs(), ids=lambda p: p.name[:48])
def test_live_equals_replay(log: Path, tmp_path: Path) -> None:
    expected = _replayed(log)
    complete = _live(log, tmp_path / "complete.log", bursts=False)
    assert complete == expected, "file complete before the start"
    appended = _live(log, tmp_path / "appended.log", bursts=True, seed=len(log.name))
    assert appended == expected, "bytes appended in bursts"


@pytest.mark.skipif(not REALWORLD.is_dir(), reason=f"the shared real-world corpus is not at {REALWORLD}")
def test_the_corpus_is_all_there() -> None:
    names = {p.name for p in fixture_logs()}
    assert len([n for n in names if n[:2].isdigit()]) == 20, "the 20 shared real-world logs"
    assert "dflash_broken_batching_fx_crash.log" in names


# The logs whose live clock is the most sensitive to where a burst ends: 18
# holds 1066 unstamped steps before its first stamp (45 days behind the wall
# clock those steps are read on); 03 is one tqdm bar redrawn with CR, whose
# bursts end mid-redraw. More cuts of the same bytes than one seed gives.
CLOCK_SENSITIVE = ("18_nanochat", "03_olora")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 5))
@pytest.mark.parametrize("prefix", CLOCK_SENSITIVE)
def test_live_equals_replay_wherever_the_bursts_end(prefix: str, seed: int, tmp_path: Path) -> None:
    log = next(REALWORLD.glob(prefix + "*.log"), None)
    if log is None:
        pytest.skip(f"the shared real-world corpus is not at {REALWORLD}")
    assert _live(log, tmp_path / "appended.log", bursts=True, seed=seed) == _replayed(log)
