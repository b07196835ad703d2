"""A Lightning callback that writes probe lines, without importing Lightning here.

    trainer = L.Trainer(..., callbacks=[DflashProbeCallback()])

``on_train_batch_end`` gets the batch itself: a tensor, a tuple whose
first item is the inputs, or a mapping with ``input_ids`` and
``attention_mask``. Lightning checks that callbacks are its ``Callback``,
so the class is built on first use (PEP 562 ``__getattr__``) on top of
``lightning.pytorch.Callback`` (or ``pytorch_lightning.Callback``) when
one is installed, and on ``object`` otherwise: importing this module
never imports Lightning, and the hooks are the same either way.

Health figures (issue 19): ``step_seconds`` is the callback's own time from
``on_train_batch_start`` to ``on_train_batch_end``; ``loss`` is the step's
output (the tensor ``training_step`` returned, or its ``"loss"``), kept a
tensor until the probe flushes; ``grad_norm`` is read from the logged
metrics when the module logs one (a key ending in ``grad_norm``).
"""

from __future__ import annotations

import time
from typing import Any

from .probe import Probe


class ProbeHooks:
    """The callback's hooks; ``probe_kwargs`` go to ``Probe``."""

    def __init__(self, probe: Probe | None = None, **probe_kwargs: Any) -> None:
        super().__init__()
        self.probe = probe if probe is not None else Probe(**probe_kwargs)
        self._batch_began: float | None = None

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._batch_began = time.perf_counter()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        began, self._batch_began = self._batch_began, None
        try:
            step = getattr(trainer, "global_step", None)
            self.probe.step(
                batch=batch, step=step if isinstance(step, int) else batch_idx,
                loss=_loss(outputs), grad_norm=_grad_norm(trainer),
                step_seconds=None if began is None else time.perf_counter() - began,
            )
        except Exception as exc:  # noqa: BLE001 - never into training
            self.probe._warn(exc)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.probe.flush()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.probe.flush()


def _loss(outputs: Any) -> Any:
    """The loss ``training_step`` returned: a tensor, or a mapping's ``"loss"``."""
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    if outputs is None or isinstance(outputs, bool):
        return None
    if isinstance(outputs, (int, float)) or getattr(outputs, "numel", lambda: 0)() == 1:
        return outputs.detach() if hasattr(outputs, "detach") else outputs
    return None


def _grad_norm(trainer: Any) -> Any:
    """A grad norm the module logged (``self.log("grad_norm", ...)``), if any."""
    metrics = getattr(trainer, "callback_metrics", None)
    if not isinstance(metrics, dict):
        return None
    for key, value in metrics.items():
        if isinstance(key, str) and key.endswith("grad_norm") and not key.startswith("val"):
            return value.detach() if hasattr(value, "detach") else value
    return None


def _lightning_base() -> type:
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            module = __import__(name, fromlist=["Callback"])
            return module.Callback
        except Exception:  # noqa: BLE001
            continue
    return object


_built: type | None = None


def __getattr__(name: str) -> Any:
    global _built
    if name != "DflashProbeCallback":
        raise AttributeError(name)
    if _built is None:
        base = _lightning_base()
        bases = (ProbeHooks,) if base is object else (ProbeHooks, base)
        _built = type("DflashProbeCallback", bases, {"__module__": __name__, "__doc__": ProbeHooks.__doc__})
    return _built
