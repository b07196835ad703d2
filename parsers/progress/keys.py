"""What the names of a progress line's numbers mean.

Frameworks name one quantity a dozen ways (``tok/sec``, ``tokens_per_s``,
``tps``; ``dt``, ``step_avg``, ``elapsed time per iteration (ms)``). One
table per field maps the spellings onto it; ``classify`` tells a reader
which field a key fills. The sets are disjoint, so a key has one kind.

Per-GPU rates (``tokens_per_sec_per_gpu``) are in no set: they stay
metrics, never the run's rate. torchtitan's ``tps`` is taken as tokens/s
as printed; the throughput detector compares a run with its own baseline,
so a consistent per-device figure serves as well.
"""

from __future__ import annotations

from ..numbers import SECONDS

STEP_KEYS = frozenset({"step", "global_step", "iteration", "iter", "train/step", "train/global_step"})
TOTAL_KEYS = frozenset({"total_steps", "max_steps", "num_steps", "total_iterations", "train_iters"})
LOSS_KEYS = frozenset({
    "loss", "lm_loss", "train_loss", "train/loss", "training_loss", "loss/train", "train_lm_loss",
})
TOKENS_KEYS = frozenset({
    "tok/s", "tok/sec", "toks/s", "tokens/s", "tokens/sec", "tokens/second", "tok_per_s",
    "tok_per_sec", "tokens_per_s", "tokens_per_sec", "tokens_per_second", "train_tokens_per_second",
    "train/tokens_per_s", "train/tokens_per_second", "throughput/tokens_per_s", "tps", "wps",
    # tqdm postfix names (``set_postfix(tok_s=...)``: keywords cannot hold '/')
    "tok_s", "toks_s", "tokens_s", "tok_sec", "tokens_sec",
})
SAMPLES_KEYS = frozenset({
    "samples/s", "samples/sec", "samples/second", "sample/s", "samples_per_s", "samples_per_sec",
    "samples_per_second", "train_samples_per_second", "train/samples_per_second", "samples_s",
    "throughput/samples_per_s",
})
# An iteration rate the run prints itself (not one worked out from a time).
STEPS_RATE_KEYS = frozenset({
    "it/s", "its/s", "iter/s", "iters/s", "steps/s", "steps/sec", "steps_per_s", "steps_per_sec",
    "steps_per_second", "train_steps_per_second", "train/steps_per_second", "it_s", "steps_s",
})
STEP_TIME_KEYS = frozenset({
    "dt", "step_avg", "step_time", "time_per_step", "iter_time", "time_per_iteration",
    "elapsed_time_per_iteration", "step_seconds", "s/step", "sec/step", "s/it", "train/step_time",
    "time/step", "time/iter", "time/iteration", "iteration_time", "time_per_iter", "s/iter",
    "sec/it", "sec/iter", "s/iteration", "ms/step", "ms/it", "ms/iter", "ms/iteration",
})
# Counts whose ratio is the tokens per sample: paired by name only
# (``consumed_tokens`` with ``consumed_samples``), so that a per-step
# count is never divided by a cumulative one.
TOKEN_COUNT_KEYS = frozenset({
    "consumed_tokens", "tokens", "num_tokens", "tokens_seen", "total_tokens", "train/tokens",
    "num_input_tokens_seen",
})
SAMPLE_COUNT_KEYS = frozenset(k.replace("tokens", "samples") for k in TOKEN_COUNT_KEYS)

STEP, TOTAL, LOSS, TOKENS, TIME, SAMPLES, STEPS_RATE, TOKEN_COUNT, SAMPLE_COUNT, OTHER = range(10)
# Kinds whose value is also kept as a metric: no Progress field of their own.
AS_METRIC = frozenset({SAMPLES, STEPS_RATE, TOKEN_COUNT, SAMPLE_COUNT})

_KINDS: dict[str, int] = {}
for _kind, _keys in (
    (STEP, STEP_KEYS), (TOTAL, TOTAL_KEYS), (LOSS, LOSS_KEYS), (TOKENS, TOKENS_KEYS), (TIME, STEP_TIME_KEYS),
    (SAMPLES, SAMPLES_KEYS), (STEPS_RATE, STEPS_RATE_KEYS), (TOKEN_COUNT, TOKEN_COUNT_KEYS),
    (SAMPLE_COUNT, SAMPLE_COUNT_KEYS),
):
    for _key in _keys:
        assert _key not in _KINDS, _key  # one kind per key
        _KINDS[_key] = _kind

_NORMS: dict[str, tuple[str, str | None]] = {}


def norm(key: str) -> tuple[str, str | None]:
    """Lower-case, ``_`` for spaces; a ``(ms)``/``_ms`` suffix or a ``ms/``
    prefix becomes the unit. Memoised: a log repeats the same few keys."""
    found = _NORMS.get(key)
    if found is not None:
        return found
    k = "_".join(key.lower().split())
    found = (k, "ms" if k.startswith("ms/") else None)
    for suffix, unit in (("_(ms)", "ms"), ("(ms)", "ms"), ("_ms", "ms"), ("_(s)", "s"), ("(s)", "s")):
        if k.endswith(suffix) and len(k) > len(suffix):
            found = (k[: -len(suffix)], unit)
            break
    if len(_NORMS) > 4096:
        _NORMS.clear()
    _NORMS[key] = found
    return found


def classify(key: str, unit: str | None) -> tuple[int, float | None]:
    """The field a key names, and (step times) the seconds of its unit."""
    name, key_unit = norm(key)
    kind = _KINDS.get(name, OTHER)
    if name == "time" and unit in ("ms", "s"):
        # nanoGPT's "time 96.12ms" is its step time; a bare "time" is a clock.
        kind = TIME
    if kind == TIME:
        return kind, SECONDS.get(unit or key_unit or "s")
    return kind, None


def count_family(key: str) -> str:
    """The name a token count and its sample count share
    (``consumed_tokens`` and ``consumed_samples``: ``consumed_*``)."""
    return norm(key)[0].replace("tokens", "*").replace("samples", "*")
