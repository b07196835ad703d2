"""Random logs for the differential tests (fast path against the per-event
path, compiled kernels against their Python loops): one home, used by
tests/shell/test_fast_path_equivalence.py, tests/core/test_native.py and
tests/core/test_detector_shortcuts.py; and the events of a log fed to a
stream in random chunks (``stream_events``)."""

from __future__ import annotations

import random
from pathlib import Path


def random_log(path: Path, seed: int, lines: int = 3000) -> Path:
    """A log of random stretches: US, ISO and glog stamps, tqdm bars (some
    redrawn with '\\r'), rank prefixes, unstamped step lines that carry
    their step time, stamps that step back, silences, a rate that drops,
    odd values (nan, inf, '3/0') and tracebacks."""
    rng = random.Random(seed)
    t = 1_764_410_400.0 + rng.randrange(86400)
    step = 0
    rate = 21.5
    out: list[str] = []

    def us(t: float) -> str:
        import time as _time

        return _time.strftime("%m/%d/%Y %H:%M:%S", _time.gmtime(t))

    def iso(t: float) -> str:
        import time as _time

        return _time.strftime("%Y-%m-%d %H:%M:%S", _time.gmtime(t)) + f",{int(t * 1000) % 1000:03d}"

    while len(out) < lines:
        kind = rng.random()
        n = rng.randrange(1, 60)
        if kind < 0.02:
            t += rng.choice((300, 900, -30, -1.5))  # a silence, or the clock stepped back
        elif kind < 0.04:
            rate = rng.choice((21.5, 9.0, 21.5, 30.0))  # a drop, or recovery
        for _ in range(n):
            t += rng.uniform(0.5, 6.0)
            step += 1
            r = rng.random()
            tps = rate * (1 + rng.uniform(-0.05, 0.05))
            loss = rng.choice(("nan", "inf")) if rng.random() < 0.01 else f"{2 + rng.random():.4f}"
            if kind < 0.3:
                out.append(f"{us(t)} - INFO - __main__ - step {step}/{rng.choice((5000, 0, 5000))} | loss {loss} | {tps:.1f} Ktok/s")
            elif kind < 0.45:
                out.append(f"{iso(t)} - INFO - train - step {step} | loss {loss} | tok/s {tps * 1000:.0f} | grad_norm 0.9")
            elif kind < 0.55:
                bar = f"Training: {step % 100:3d}%|{'#' * (step % 10):<10}| {step}/9000 [00:{step % 60:02d}<01:00, {tps / 10:.2f}it/s]"
                out.append(bar + ("\r" + bar if r < 0.3 else ""))
            elif kind < 0.65:
                out.append(f"step {step:05d}/09000 | loss: {loss} | dt: {rng.uniform(400, 600):.2f}ms | tok/sec: {tps * 1000:,.0f}")
            elif kind < 0.75:
                out.append(f"[rank{rng.randrange(4)}]:{us(t)} - INFO - train - step {step // 4} | loss {loss} | {tps:.1f} Ktok/s")
            elif kind < 0.8:
                out.append(f"W1129 10:{int(t) // 60 % 60:02d}:{int(t) % 60:02d}.123456 4242 loader.cc:12] slow worker")
            elif kind < 0.81:
                out.extend([
                    "Traceback (most recent call last):",
                    '  File "/opt/train.py", line 9, in <module>',
                    "    main()",
                    "RuntimeError: CUDA error: an illegal memory access was encountered",
                ])
                break
            else:
                out.append(f"{us(t)} - INFO - data - loaded shard {rng.randrange(10**6)}")
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def stream_events(path: Path, seed: int, most: int = 80) -> list[str]:
    """The events (reprs) of one stream fed ``path`` in random chunks of 1
    to ``most`` whole lines (a chunk's first event may sit behind the clock
    the last one left). The stream is ``ingest.LogStream``, so a test's
    monkeypatched one is used."""
    from dflash_watch import ingest

    rng = random.Random(seed)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    stream = ingest.LogStream("log", replay=True)
    out: list[str] = []
    at = 0
    while at < len(lines):
        n = rng.randrange(1, most)
        out.extend(map(repr, stream.feed("".join(lines[at : at + n]), at + 1, 1_700_000_000.0)))
        at += n
    out.extend(map(repr, stream.flush(1_700_000_000.0)))
    return out
