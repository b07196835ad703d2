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
"""

from __future__ import annotations

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

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        micro, self._micro = self._micro, []
        try:
            counts = merge_micro_batches(micro)
            self.probe.step(step=getattr(state, "global_step", None), **counts)
        except Exception as exc:  # noqa: BLE001
            self.probe._warn(exc)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            if self._handle is not None:
                self._handle.remove()
                self._handle = None
        except Exception as exc:  # noqa: BLE001
            self.probe._warn(exc)
        self.probe.flush()
