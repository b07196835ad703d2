"""The GPU sampler's own thread: ``GpuSampler.sample`` at a fixed rate, off the UI.

It imports no NVML: it calls whatever sampler it is given, so the
dashboard and headless mode start it without loading pynvml here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dflash_watch.parsers.events import GpuLost, GpuSample

if TYPE_CHECKING:
    from .nvml import GpuSampler


class SamplerThread:
    """Runs ``sampler.sample`` every ``interval`` seconds off the UI thread.

    The schedule is fixed-rate on a monotonic clock (a slow sample does not
    drift the ones after it; missed slots are skipped, not bunched), while
    sample times come from ``clock`` so they share the data's clock.
    Exceptions from the sampler or the callback are reported once and the
    thread keeps going: the watcher outlives its plumbing.
    """

    def __init__(
        self,
        sampler: GpuSampler,
        interval: float,
        callback: Callable[[list[GpuSample | GpuLost]], object],
        clock: Callable[[], float] = time.time,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"sampling interval must be positive, got {interval}")
        self.sampler = sampler
        self.interval = float(interval)
        self._callback = callback
        self._clock = clock
        self._on_error = on_error
        self._reported: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
        self.samples = 0
        self.last_duration: float | None = None  # seconds the last sample() took

    def start(self) -> SamplerThread:
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                batch = self.sampler.sample(self._clock())
            except Exception as err:
                self._report("sampler", err)
                batch = []
            self.last_duration = time.perf_counter() - started
            self.samples += 1
            if batch and not self._stop.is_set():
                try:
                    self._callback(batch)
                except Exception as err:
                    self._report("callback", err)
            next_at += self.interval
            now = time.monotonic()
            if next_at < now:
                next_at = now + self.interval - (now - next_at) % self.interval
            self._stop.wait(next_at - now)

    def _report(self, where: str, err: Exception) -> None:
        key = f"{where}:{type(err).__name__}"
        if key in self._reported:
            return
        self._reported.add(key)
        message = f"GPU sampler {where} failed ({type(err).__name__}: {err}); sampling continues"
        sink = self._on_error or getattr(self.sampler, "notify", None)
        if sink is not None:
            try:
                sink(message)
            except Exception:
                pass
