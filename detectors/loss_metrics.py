"""Which of a step line's metrics the ``loss`` detector reads, by name.

A ``Progress`` line carries its other numbers as (name, value) pairs in
the log's own spelling: ``train/grad_norm``, ``grad norm``, ``loss_scale``,
Megatron's ``number of nan iterations``, DeepSpeed's ``skipped``. Each name
is worked out once (``code_of``) and kept in ``CODES``: a log repeats a
handful of names on every line, so a line then costs one dict lookup per
metric, not a normalisation.

>>> [code_of(n) for n in ("train/grad_norm", "Loss-Scale", "number of nan iterations", "lr")] == [GRAD, SCALE, NAN, OTHER]
True
"""

from __future__ import annotations

GRAD_KEYS = frozenset({"grad_norm", "gnorm", "global_grad_norm", "total_grad_norm", "grad_norm_total"})
SCALE_KEYS = frozenset({"loss_scale", "loss_scaler", "lossscale"})
# Megatron prints both per log interval (they reset after each report).
NAN_ITERS = "number of nan iterations"
SKIPPED_ITERS = "number of skipped iterations"
# DeepSpeed's ``step=10, skipped=8, lr=[...]``: cumulative since the start.
SKIPPED_TOTAL = "skipped"

# What a name is to the detector: none of its figures, the grad norm (the
# first one on a line counts), the loss scale (likewise), or one of the
# three skip/NaN counters (the last one counts).
OTHER, GRAD, SCALE, NAN, SKIP, SKIP_TOTAL = range(6)
CODES: dict[str, int] = {}
_CODES_MAX = 4096  # a log that makes up names as it goes cannot grow it without bound


def key(name: str) -> str:
    """``train/grad_norm``, ``grad norm``, ``Grad-Norm`` -> ``grad_norm``."""
    return name.rsplit("/", 1)[-1].strip().lower().replace(" ", "_").replace("-", "_")


def code_of(name: str) -> int:
    """What ``name`` is to the detector; remembered in ``CODES``."""
    if len(CODES) >= _CODES_MAX:
        CODES.clear()
    if name == NAN_ITERS:
        code = NAN
    elif name == SKIPPED_ITERS:
        code = SKIP
    elif name == SKIPPED_TOTAL:
        code = SKIP_TOTAL
    else:
        k = key(name)
        code = GRAD if k in GRAD_KEYS else SCALE if k in SCALE_KEYS else OTHER
    CODES[name] = code
    return code


# A step line's loss figures besides the loss: grad norm, loss scale, NaN
# iterations, skipped iterations, skipped in all (None: not on the line).
Figures = tuple[float | None, float | None, float | None, float | None, float | None]
NO_FIGURES: Figures = (None, None, None, None, None)


def figures_of(metrics: tuple[tuple[str, float], ...]) -> Figures:
    """The loss figures among a step line's numbers, by ``code_of``: the
    first grad norm and loss scale count, the last of each counter. The one
    reading of them, for the detector's step lines one at a time
    (``LossDetector._on_progress``) and in runs (``loss_reports``)."""
    grad = scale = nan_iters = skipped = skipped_total = None
    codes = CODES
    for name, value in metrics:
        code = codes.get(name)
        if code is None:
            code = code_of(name)
        if code == OTHER:
            continue
        if code == GRAD:
            if grad is None:
                grad = value
        elif code == SCALE:
            if scale is None:
                scale = value
        elif code == NAN:
            nan_iters = value
        elif code == SKIP:
            skipped = value
        else:
            skipped_total = value
    return grad, scale, nan_iters, skipped, skipped_total
