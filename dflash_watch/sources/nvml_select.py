"""Which GPUs to watch: explicit indices, else CUDA_VISIBLE_DEVICES, else all.

Pure: it takes the NVML devices' UUIDs and gives back indices and notices,
so it is tested without NVML and ``GpuSampler`` only applies its answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def select_gpus(
    uuids: Sequence[str | None],
    indices: Iterable[int] | None = None,
    cuda_visible_devices: str | None = None,
) -> tuple[list[int], list[str]]:
    """Pick NVML indices to watch; return them and notices about what was skipped.

    ``uuids[i]`` is the UUID of NVML device ``i``. Explicit ``indices`` win
    over ``cuda_visible_devices``; None for both means every GPU. Integer
    entries of CUDA_VISIBLE_DEVICES are read as NVML indices, which match
    CUDA's only under CUDA_DEVICE_ORDER=PCI_BUS_ID (UUID entries are exact).
    Unlike CUDA, a bad entry is skipped rather than ending the list: a
    watcher should show more, not silently less. ``-1`` ends the list as in
    CUDA. MIG instances cannot be sampled on their own: ``MIG-GPU-<uuid>/..``
    maps to its parent GPU, a bare ``MIG-<uuid>`` is skipped, and a list of
    nothing but unmappable MIG entries falls back to every GPU.
    """
    count = len(uuids)
    notices: list[str] = []
    if indices is not None:
        chosen: list[int] = []
        for i in indices:
            if 0 <= i < count:
                if i not in chosen:
                    chosen.append(i)
            else:
                notices.append(f"GPU {i} does not exist ({count} GPUs); skipped")
        return chosen, notices
    if cuda_visible_devices is None:
        return list(range(count)), notices
    text = cuda_visible_devices.strip()
    if not text:
        return [], ["CUDA_VISIBLE_DEVICES is empty: no GPU selected"]
    chosen = []
    skipped_mig = False
    for raw in text.split(","):
        entry = raw.strip()
        found: int | None = None
        if entry.lstrip("-").isdigit():
            number = int(entry)
            if number < 0:
                break
            if number < count:
                found = number
            else:
                notices.append(f"CUDA_VISIBLE_DEVICES entry {entry}: no such GPU ({count} GPUs); skipped")
        elif entry.upper().startswith("MIG-GPU-"):
            found = _match_uuid(uuids, entry[4:].split("/")[0], entry, notices)
            if found is not None:
                notices.append(f"CUDA_VISIBLE_DEVICES entry {entry}: MIG instance shown as its whole GPU {found}")
        elif entry.upper().startswith("MIG-"):
            skipped_mig = True
            notices.append(f"CUDA_VISIBLE_DEVICES entry {entry}: MIG instances are not sampled; skipped")
        elif entry.upper().startswith("GPU-"):
            found = _match_uuid(uuids, entry, entry, notices)
        elif entry:
            notices.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} not understood; skipped")
        if found is not None and found not in chosen:
            chosen.append(found)
    if not chosen and skipped_mig:
        notices.append("CUDA_VISIBLE_DEVICES names only MIG instances: watching every GPU")
        return list(range(count)), notices
    return chosen, notices


def _match_uuid(uuids: Sequence[str | None], prefix: str, entry: str, notices: list[str]) -> int | None:
    prefix = prefix.lower()
    hits = [i for i, u in enumerate(uuids) if u is not None and u.lower().startswith(prefix)]
    if len(hits) == 1:
        return hits[0]
    why = "matches no GPU" if not hits else f"is ambiguous (GPUs {', '.join(map(str, hits))})"
    notices.append(f"CUDA_VISIBLE_DEVICES entry {entry} {why}; skipped")
    return None
