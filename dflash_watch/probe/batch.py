"""Tokens, padded tokens and shape of one batch, without a GPU sync.

``mask.sum()`` on a CUDA tensor is queued like any kernel, but turning it
into a Python int (``.item()``) waits for the GPU to finish everything
queued before it: per step, that would serialise the host with the device
and cost real throughput. So a CUDA count is launched at the step and
stays a 0-d tensor on the device (8 bytes) until the probe flushes, when
all the counts of a flush are fetched together in one transfer: one sync
per flush (every N steps or S seconds) instead of one per step, at the
price of the counts arriving up to a flush late.

A CPU mask is counted at the flush too, in one tight loop over the
buffered masks: right after a training step the interpreter and the
caches are cold, and the same reduction costs ten times more there
(benchmarks/bench_probe_overhead.py). The probe then holds a reference
to up to N masks (small integer tensors, batch x length); a loop that
refills one mask buffer in place should pass the counts instead. Shapes
are metadata, read at the step: they never touch the device.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any, cast

_INPUT_KEYS = ("input_ids", "inputs_embeds", "input_values", "pixel_values")


def is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


class Deferred:
    """A count to be known at the flush: a sum of parts.

    A part is an int, ``("count", tensor, pad_id)`` (the non-zero entries
    of a mask, or the entries that are not ``pad_id``), or ``("value",
    tensor)`` (a 0-d tensor holding the number). Sums of micro-batches stay
    deferred (``+``).
    """

    __slots__ = ("parts",)

    def __init__(self, *parts: Any) -> None:
        self.parts = parts

    def __add__(self, other: Any) -> Deferred:
        more = other.parts if isinstance(other, Deferred) else (other,)
        return Deferred(*self.parts, *more)

    __radd__ = __add__


def from_batch(batch: Any = None, attention_mask: Any = None, pad_token_id: int | None = None,
               out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Counts of one batch: a tensor ``[batch, seq, ...]``, a tuple whose
    first item is one, or a mapping with ``input_ids`` and ``attention_mask``
    (a Hugging Face batch); written into ``out``.

    ``tokens`` is the mask's non-zero entries (or the non-pad positions,
    with ``pad_token_id``), ``padded_tokens`` the mask's size. Without a
    mask or pad id the real tokens are unknown: only the shape is
    reported, since counting every position as a token would claim no
    padding at all.
    """
    out = {} if out is None else out
    torch = sys.modules.get("torch")
    if torch is None:
        return out
    tensor = torch.Tensor
    if not isinstance(batch, tensor) and batch is not None:
        if isinstance(batch, Mapping):
            if attention_mask is None:
                attention_mask = batch.get("attention_mask")
            batch = next((batch[k] for k in _INPUT_KEYS if isinstance(batch.get(k), tensor)), None)
        elif isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], tensor):
            batch = batch[0]  # (inputs, labels) from a plain DataLoader
        else:
            batch = None
    mask = attention_mask if isinstance(attention_mask, tensor) else None
    shape = (mask if mask is not None else batch if batch is not None else None)
    if shape is not None:
        dims = shape.shape
        if len(dims) >= 1:
            out["batch_size"] = dims[0]
            if len(dims) >= 2:
                out["seq_len"] = dims[1]
    if mask is not None:
        out["tokens"] = count(mask)
        out["padded_tokens"] = mask.numel()
    elif pad_token_id is not None and batch is not None and batch.dim() >= 1:
        ids = batch if batch.dim() <= 2 else batch[..., 0]
        out["tokens"] = count(ids, pad_token_id)
        out["padded_tokens"] = ids.numel()
    return out


def count(flags: Any, pad_id: int | None = None) -> Deferred:
    """The non-zero (or non-``pad_id``) entries of ``flags``, known at the flush.

    ``count_nonzero``, not ``sum``: a packing collator may put segment ids
    (1, 2, 3...) in the mask, and those are tokens once each. On a device
    the reduction is launched now (no sync) and only its 0-d result kept.
    """
    if flags.is_cpu:
        return Deferred(("count", flags, pad_id))
    torch = sys.modules["torch"]
    total = torch.count_nonzero(flags if pad_id is None else flags != pad_id)
    return Deferred(("value", total))


def value(number: Any) -> Any:
    """A count given by the caller: an int now, or a tensor read at the flush."""
    if isinstance(number, Deferred):
        return number
    if is_tensor(number):
        return Deferred(("value", number))
    return int(number)


def resolve(values: list[Any]) -> list[int]:
    """Counts as ints: CPU masks counted in one loop, device numbers fetched
    in one transfer per device."""
    # Only a tensor makes a Deferred part, so torch is loaded whenever it is
    # used below (cast: mypy cannot follow that); plain ints never touch it.
    torch = cast(ModuleType, sys.modules.get("torch"))
    device_parts: dict[Any, list[Any]] = {}
    for v in values:
        for part in v.parts if isinstance(v, Deferred) else ():
            if isinstance(part, tuple) and part[0] == "value" and not part[1].is_cpu:
                device_parts.setdefault(part[1].device, []).append(part[1])
    fetched: dict[int, int] = {}
    for tensors in device_parts.values():
        got = torch.stack([t.reshape(()) for t in tensors]).tolist()
        fetched.update((id(t), int(g)) for t, g in zip(tensors, got))
    out = []
    for v in values:
        if not isinstance(v, Deferred):
            out.append(int(v))
            continue
        total = 0
        for part in v.parts:
            if not isinstance(part, tuple):
                total += int(part)
            elif part[0] == "count":
                flags, pad = part[1], part[2]
                total += int(torch.count_nonzero(flags if pad is None else flags != pad))
            elif part[1].is_cpu:
                total += int(part[1])
            else:
                total += fetched[id(part[1])]
        out.append(total)
    return out


def merge_micro_batches(micro: list[dict[str, Any]]) -> dict[str, Any]:
    """One optimizer step from its micro-batches: sums, and the longest sequence.

    A count is kept only when every micro-batch had it: a sum over some of
    them would understate the step.
    """
    out: dict[str, Any] = {}
    if not micro:
        return out
    for key in ("tokens", "padded_tokens", "batch_size"):
        if all(key in m for m in micro):
            total = micro[0][key]
            for m in micro[1:]:
                total = total + m[key]
            out[key] = total
    lens = [m["seq_len"] for m in micro if "seq_len" in m]
    if lens:
        out["seq_len"] = max(lens)
    return out
