"""`--metrics-file`: node_exporter's textfile mode, replaced atomically.

A reader (node_exporter) may open the file at any moment; it must always
find a whole exposition, never a half-written one, and the values at exit
must be the last ones.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from dflash_watch.metrics.collector import build_registry
from dflash_watch.metrics.exporter import TextfileExporter
from dflash_watch.monitor import Monitor
from dflash_watch.parsers.events import GpuSample

T0 = datetime(2026, 11, 29, 10, 0, 0).timestamp()
STEP = "2026-11-29 10:{m:02d}:{s:02d},000 - INFO - dflash.train - step {n}/100000 | loss 2.31 | 21.5 Ktok/s\n"


def _values(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def test_every_read_is_a_whole_file_and_the_last_write_has_the_last_values(tmp_path: Path) -> None:
    m = Monitor()
    path = tmp_path / "dflash.prom"
    exporter = TextfileExporter(build_registry(m), str(path), interval_s=0.002)
    stop = threading.Event()

    def feed() -> None:
        n = 0
        while not stop.is_set() and n < 200_000:  # until the reader has read enough
            n += 1
            m.feed_samples([GpuSample(T0 + n, g, n * 1000 + g, 10**12) for g in range(8)])
            m.feed_text("train.log", STEP.format(m=n // 60 % 60, s=n % 60, n=n), n, T0 + n)
            # The tailer reads its file between feeds (the GIL and the
            # Monitor's lock are free then): without a gap, this loop takes
            # the lock back before the exporter's thread can run at all.
            time.sleep(0)

    feeder = threading.Thread(target=feed)
    feeder.start()
    reads = 0
    try:
        # Until 40 whole reads AND 5 writes among them: how many writes 40
        # reads span depends on who gets the GIL, not on the exporter.
        deadline = time.monotonic() + 30.0
        while feeder.is_alive() and (reads < 40 or exporter.writes < 5) and time.monotonic() < deadline:
            text = path.read_text()
            # build_info is the last family written: a cut file lacks it.
            assert text.rstrip().endswith('dflash_build_info{version="%s"} 1.0' % exporter_version()), text[-200:]
            list(text_string_to_metric_families(text))
            reads += 1
    finally:
        stop.set()
        feeder.join()
    writes_before = exporter.writes
    exporter.close(2.0)
    assert reads >= 40 and writes_before >= 5, (reads, writes_before)
    # At exit: the final values, and no temporary file left beside it.
    step = m.last_progress.step
    assert _values(path.read_text())["dflash_step"] == step
    assert [p.name for p in tmp_path.iterdir()] == ["dflash.prom"]
    # node_exporter has process_* of its own: the file carries only ours.
    names = {f.name for f in text_string_to_metric_families(path.read_text())}
    assert names and all(n.startswith("dflash_") for n in names), names


def exporter_version() -> str:
    from importlib.metadata import version

    return version("dflash-watch")
