"""A Hugging Face ``TrainerCallback`` that writes probe lines.

    trainer = Trainer(..., callbacks=[DflashProbeCallback()])

``on_step_end`` gets no batch, and wrapping ``Trainer.training_step``
would need the trainer object, which callbacks never see (and would break
with every Trainer subclass that overrides it). What every Trainer does,
whatever its subclass, accelerate or DDP wrapping, is call the model with
the batch as keyword arguments. So ``on_train_begin`` puts a forward
pre-hook on the model it is handed, which counts ``attention_mask`` (or
the shape of ``input_ids``) of each training forward, and ``on_step_end``
writes one line per optimizer step with the sum over its micro-batches
(gradient accumulation): tokens and padded tokens summed, batch size
summed, sequence length the longest. Forwards with the model in eval mode
(evaluation, generation) are not counted. The hook only launches a
reduction: the counts stay on the device until the probe flushes.

Health figures (issue 19): ``step_seconds`` is the callback's own time
from ``on_step_begin`` to ``on_step_end``; ``loss`` and ``grad_norm`` come
from ``on_log`` (every ``logging_steps``), which the Trainer calls right
after ``on_step_end``: the step's line is held until then (or until the
next step begins) and written with them. ``eval_loss`` is not the training loss and is left out.
"""

from __future__ import annotations

import time
from typing import Any

from .batch import from_batch, is_tensor, merge_micro_batches
from .probe import Probe

_Base: type
try:  # a real subclass where transformers is there (the Trainer checks nothing, but tools do)
    from transformers import TrainerCallback

    _Base = TrainerCallback
except Exception:  # noqa: BLE001 - the probe works without transformers installed
    _Base = object


class DflashProbeCallback(_Base):  # type: ignore[misc, valid-type]
    """Probe lines from a Hugging Face Trainer; ``probe_kwargs`` go to ``Probe``."""

    def __init__(self, probe: Probe | None = None, **probe_kwargs: Any) -> None:
        self.probe = probe if probe is not None else Probe(**probe_kwargs)
        self._handle: Any = None
        self._micro: list[dict[str, Any]] = []
        self._step_began: float | None = None
        self._held: dict[str, Any] | None = None

    # -- the forward pre-hook ---------------------------------------------------
    def _pre_hook(self, module: Any, args: tuple, kwargs: dict) -> None:
        try:
            if not getattr(module, "training", True):
                return
            batch = kwargs.get("input_ids")
            if batch is None and kwargs.get("inputs_embeds") is not None:
                batch = kwargs["inputs_embeds"]
            if batch is None and args and is_tensor(args[0]):
                batch = args[0]
            mask = kwargs.get("attention_mask")
            if batch is None and mask is None:
                return
            self._micro.append(from_batch(batch, mask, self.probe.pad_token_id))
        except Exception as exc:  # noqa: BLE001 - never into training
            self.probe._warn(exc)

    # -- TrainerCallback ---------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        try:
            if model is not None and self._handle is None:
                self._handle = model.register_forward_pre_hook(self._pre_hook, with_kwargs=True)
        except Exception as exc:  # noqa: BLE001
            self.probe._warn(exc)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._emit()
        self._step_began = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        micro, self._micro = self._micro, []
        began, self._step_began = self._step_began, None
        try:
            self._emit()
            counts: dict[str, Any] = merge_micro_batches(micro)
            counts["step"] = getattr(state, "global_step", None)
            counts["step_seconds"] = None if began is None else time.perf_counter() - began
            # Held until on_log (called right after, on logging steps) has
            # added the loss, or until the next step begins.
            self._held = counts
        except Exception as exc:  # noqa: BLE001
            self.probe._warn(exc)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        try:
            if not logs:
                return
            figures = {"loss": _number(logs.get("loss")), "grad_norm": _number(logs.get("grad_norm"))}
            held = self._held
            if held is not None and held.get("step") == getattr(state, "global_step", None):
                held.update((k, v) for k, v in figures.items() if v is not None)
                self._emit()
            else:
                self.probe.amend(step=getattr(state, "global_step", None), **figures)
        except Exception as exc:  # noqa: BLE001
            self.probe._warn(exc)

    def _emit(self) -> None:
        """Write the held step's line (its figures complete)."""
        held, self._held = self._held, None
        if held is not None:
            self.probe.step(**held)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            if self._handle is not None:
                self._handle.remove()
                self._handle = None
            self._emit()
        except Exception as exc:  # noqa: BLE001
            self.probe._warn(exc)
        self.probe.flush()


def _number(value: Any) -> float | None:
    """A logged figure as a float (NaN and Inf kept); None if it is none."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None
