"""The rules that score each kind of change against the symptom at hand.

Each rule looks at one part of the two profiles and returns the changes it
finds, each scored by how well it explains the symptoms (higher first) and
worded to say so. The scores are a small, readable table rather than a
model: the order they produce is what the issue asks for, and a test pins
it for each kind of broken run.

- Padding efficiency that fell, with a throughput drop and swinging
  memory, is the prime suspect: padded batches cost compute and change
  shape every step.
- Rising recompiles put compilation first.
- A cold compile cache explains slow first steps, not a steady drop
  after warm-up.
- An FX-tracing crash explains a crash, not a slowdown.
- Packages on the data path (transformers, datasets, accelerate,
  tokenizers) rank above unrelated ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import fmt_rate
from .diagnosis_profile import Profile

DATA_PATH_PACKAGES = frozenset(
    {"transformers", "datasets", "accelerate", "tokenizers", "torchdata", "webdataset"})
COMPILE_PACKAGES = frozenset({"triton", "pytorch-triton", "sympy"})
GIB = float(1 << 30)

BUCKETS_STEP = ("print the bucket boundaries the loader uses "
                "(dflash-watch buckets LENGTHS --compare B0,B1,...)")


@dataclass(frozen=True, slots=True)
class Symptoms:
    """What is wrong now, from the firing alerts and the profiles."""

    slowdown: bool = False
    memory_swing: bool = False
    padding_fell: bool = False
    recompiling: bool = False
    alloc_thrash: bool = False
    slow_start: bool = False
    fx_crash: bool = False
    crash: bool = False

    @classmethod
    def of(cls, base: Profile, now: Profile, firing: frozenset[str]) -> Symptoms:
        same_unit = base.throughput_unit == now.throughput_unit
        slowdown = "throughput_drop" in firing or (
            same_unit and _fell(base.throughput, now.throughput, to=0.8))
        bands = dict(base.gpu_memory)
        swing = "memory_volatility" in firing or any(
            gpu in bands and _band_grew(bands[gpu].band_bytes, m.band_bytes) for gpu, m in now.gpu_memory)
        padding = "padding" in firing or _fell(base.padding_efficiency, now.padding_efficiency, by=0.05)
        recompiling = "recompile" in firing or _rose(base.recompiles_per_hour, now.recompiles_per_hour, 5.0)
        alloc = "alloc_thrash" in firing or _rose(
            base.alloc_retries_per_hour, now.alloc_retries_per_hour, 10.0)
        slow_start = same_unit and _fell(base.warmup_throughput, now.warmup_throughput, to=0.7)
        return cls(slowdown, swing, padding, recompiling, alloc, slow_start,
                   "fx_tracing" in firing, "crash" in firing)


@dataclass(frozen=True, slots=True)
class Change:
    """One difference, CONTRACTS section 7: what a rule finds and
    ``diagnosis.rank_changes`` orders. ``what`` is one of the fixed names
    (``padding_efficiency``, ``package:transformers``, ...);
    ``baseline``/``now`` are JSON values (None: absent on that side);
    ``score`` orders the list (higher: explains more of the symptom);
    ``symptom``: the change is the symptom itself (throughput, step
    interval), listed for the evidence but never a suspect."""

    what: str
    baseline: Any
    now: Any
    says: str
    next_step: str
    score: float
    gpu: int | None = None
    symptom: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"what": self.what, "baseline": self.baseline, "now": self.now}
        if self.gpu is not None:
            out["gpu"] = self.gpu
        out.update(says=self.says, next_step=self.next_step, score=round(self.score, 3))
        return out

    def compact(self) -> dict[str, Any]:
        """The short form an alert's evidence carries (``suspects``)."""
        out: dict[str, Any] = {"what": self.what, "baseline": self.baseline, "now": self.now, "says": self.says}
        if self.gpu is not None:
            out["gpu"] = self.gpu
        return out


def _pair(a: float | None, b: float | None) -> tuple[float, float] | None:
    """Both figures, when both are known and the first can divide."""
    return (a, b) if a is not None and b is not None and a > 0 else None


def _fell(base: float | None, now: float | None, to: float = 1.0, by: float = 0.0) -> bool:
    """Both known and ``now`` below ``to * base - by``."""
    return base is not None and now is not None and base > 0 and now < to * base - by


def _rose(base: float | None, now: float | None, by: float) -> bool:
    return now is not None and now > max(2.0 * (base or 0.0), (base or 0.0) + by)


def _band_grew(base: float, now: float) -> bool:
    return now > max(2.0 * base, base + 0.5 * GIB)


def size(num_bytes: float) -> str:
    """Decimal sizes, as ``du -h --si`` and the issue write them: 925 KB, 353 MB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(num_bytes) >= scale:
            value = num_bytes / scale
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return f"{num_bytes:.0f} B"


def _why_slow(s: Symptoms) -> str:
    if s.slowdown and s.memory_swing:
        return "explains the throughput drop and the swinging memory"
    if s.slowdown:
        return "explains the throughput drop"
    if s.memory_swing:
        return "explains the swinging memory"
    return "no slowdown to explain yet"


# -- performance figures ---------------------------------------------------------


def padding(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    b, n = base.padding_efficiency, now.padding_efficiency
    if b is None or n is None or abs(b - n) < 0.03:
        if s.padding_fell and b is None and n is not None:
            return [Change("padding_efficiency", None, n, f"padding efficiency {n:.0%} (the padding alert is "
                          f"firing; the good run recorded none): {_why_slow(s)}?", BUCKETS_STEP,
                          40 + 20 * s.slowdown + 10 * s.memory_swing)]
        return []
    if n > b:
        return [Change("padding_efficiency", b, n, f"padding efficiency {n:.0%} vs {b:.0%} in the good run: "
                      "less padding than before, not a cause of a slowdown", BUCKETS_STEP, 3)]
    says = (f"padding efficiency {n:.0%} vs {b:.0%} in the good run: batches are padded far more "
            f"(bucketing broken?); {_why_slow(s)}")
    return [Change("padding_efficiency", b, n, says, BUCKETS_STEP, 50 + 30 * s.slowdown + 15 * s.memory_swing)]


def recompiles(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    b, n = base.recompiles_per_hour, now.recompiles_per_hour
    if not s.recompiling:
        return []
    score = 50 + 30 * s.slowdown + 10 * s.memory_swing
    head = f"recompiles {n:.3g}/h vs {b:.3g}/h in the good run" if n is not None and b is not None else (
        f"recompiles {n:.3g}/h" if n is not None
        else "recompiles: the recompile alert fired (the run is too short for a rate per hour)")
    says = (f"{head}: torch.compile keeps compiling new graphs (changing shapes or guards); "
            + ("explains the throughput drop" if s.slowdown else "no slowdown yet"))
    return [Change("recompiles", b, n, says, "run with TORCH_LOGS=recompiles to see which guard fails; "
                  "pad to fixed shapes or mark the dynamic dimension", score)]


def alloc_retries(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    b, n = base.alloc_retries_per_hour, now.alloc_retries_per_hour
    if not s.alloc_thrash:
        return []
    rate = (f"{n:.3g}/h vs {(b or 0):.3g}/h in the good run" if n is not None
            else "the alloc_thrash alert is firing")
    says = (f"allocator retries {rate}: the CUDA caching allocator frees and retries near the limit; "
            + ("explains the swinging memory" if s.memory_swing else "memory may start to swing"))
    return [Change("alloc_retries", b, n, says, "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
                  "or lower the token budget per batch", 40 + 20 * s.memory_swing + 15 * s.slowdown)]


def memory(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    bands = dict(base.gpu_memory)
    out = []
    for gpu, m in now.gpu_memory:
        b = bands.get(gpu)
        if b is None or not _band_grew(b.band_bytes, m.band_bytes):
            continue
        says = (f"GPU {gpu} memory band {m.band_bytes / GIB:.1f} GiB vs {b.band_bytes / GIB:.1f} GiB in the good "
                "run: memory is no longer flat; a symptom of changing batch shapes or allocator churn, not a cause")
        out.append(Change("memory_flatness", b.band_bytes, m.band_bytes, says,
                         "look at the padding and allocator rows; replay with --gpu-samples shows when it began",
                         30 + 10 * s.slowdown, gpu=int(gpu) if gpu.isdigit() else None, symptom=True))
    return out


def throughput(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    pair = _pair(base.throughput, now.throughput)
    if pair is None:
        return []
    b, n = pair
    if base.throughput_unit != now.throughput_unit:
        # Not "no change": the two cannot be compared (an it/s bar against a
        # tokens/s line), and a silent diff read as a healthy run.
        says = (f"throughput {fmt_rate(n, now.throughput_unit)} vs {fmt_rate(b, base.throughput_unit)} in the "
                "good run: other units, not comparable")
        return [Change("throughput", b, n, says, "save the baseline from a run that logs the same rate, or log "
                       "tokens/s in both (progress_regex in the config)", 5, symptom=True)]
    if abs(n / b - 1) < 0.1:
        return []
    unit = now.throughput_unit
    says = (f"throughput {fmt_rate(n, unit)} vs {fmt_rate(b, unit)} in the good run ({n / b - 1:+.0%}): "
            + ("the symptom; the changes above it are ranked by how well they explain it" if n < b
               else "faster than the good run"))
    step = ("check the suspects ranked above it; with none, compare the data and the batches with the good run's "
            "(dflash-watch buckets)" if n < b else "none needed")
    return [Change("throughput", b, n, says, step, 20 if n < b else 2, symptom=True)]


def step_interval(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    pair = _pair(base.step_interval_s, now.step_interval_s)
    if pair is None or 0.8 <= pair[1] / pair[0] <= 1.25:
        return []
    b, n = pair
    says = f"a step takes {n:.3g} s vs {b:.3g} s in the good run: " + (
        "the symptom, seen per step" if n > b else "steps are shorter (smaller batches?)")
    return [Change("step_interval", b, n, says, "compare tokens per step with the good run", 15, symptom=True)]


def compile_cache(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    bf, nf = base.fingerprint, now.fingerprint
    if bf is None or nf is None or bf.cache_bytes is None or nf.cache_bytes is None:
        return []
    b = {"bytes": bf.cache_bytes, "entries": bf.cache_entries}
    n = {"bytes": nf.cache_bytes, "entries": nf.cache_entries}
    cold = bf.cache_bytes >= 1e6 and nf.cache_bytes < 0.1 * bf.cache_bytes
    if not cold:
        if nf.cache_bytes == bf.cache_bytes or (bf.cache_bytes and abs(nf.cache_bytes / bf.cache_bytes - 1) < 0.5):
            return []  # as it was (both empty too: "0 B vs 0 B" is no change)
        return [Change("compile_cache", b, n, f"compile cache {size(nf.cache_bytes)} vs {size(bf.cache_bytes)} "
                      "in the good run: not cold, unlikely to matter", "none needed", 2)]
    head = f"compile cache {size(nf.cache_bytes)} vs {size(bf.cache_bytes)} in the good run"
    step = ("keep TORCHINDUCTOR_CACHE_DIR on a persistent disk (or copy the good run's cache) "
            "and compare the first steps' speed")
    if s.slow_start:
        tail = "; not the steady drop after warm-up" if s.slowdown else ""
        return [Change("compile_cache", b, n, f"{head}: a cold cache explains the slow first steps "
                      f"(every graph compiled again){tail}", step, 60)]
    if s.slowdown:
        return [Change("compile_cache", b, n, f"{head}: a cold compile cache explains slow first steps, "
                      "not a steady drop after warm-up", step, 10)]
    return [Change("compile_cache", b, n, f"{head}: a cold cache; first steps will be slower", step, 8)]


# -- the environment ---------------------------------------------------------------


def packages(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    bf, nf = base.fingerprint, now.fingerprint
    if bf is None or nf is None or bf.packages is None or nf.packages is None:
        return []
    out = []
    for name in sorted(set(bf.packages) | set(nf.packages)):
        b, n = bf.packages.get(name), nf.packages.get(name)
        if b == n or name == "torch":  # torch: its own row, with the build
            continue
        was, got = b or "missing", n or "missing"
        if name in DATA_PATH_PACKAGES:
            score = 35 + 10 * s.slowdown + 5 * s.padding_fell
            says = f"{name} {was} -> {got}: on the data path (tokenization, collation, batching); " + (
                "could explain the throughput drop" if s.slowdown else "no symptom yet")
        elif name in COMPILE_PACKAGES:
            score = 25 + 10 * (s.recompiling or s.slow_start)
            says = f"{name} {was} -> {got}: the compiler's toolchain; could change compile time and kernels"
        else:
            score = 5
            says = f"{name} {was} -> {got}: not on the data path, unlikely to explain the symptom"
        step = (f"pip install {name}=={b} in a copy of the environment and rerun a few hundred steps" if b
                else f"pip uninstall {name} in a copy of the environment and rerun a few hundred steps")
        out.append(Change(f"package:{name}", b, n, says, step, score))
    return out


def _version_differs(a: str, b: str) -> bool:
    """'3.11' and '3.11.7' are the same Python seen at two precisions."""
    pa, pb = a.split("."), b.split(".")
    k = min(len(pa), len(pb))
    return pa[:k] != pb[:k]


def interpreter(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    bf, nf = base.fingerprint, now.fingerprint
    if bf is None or nf is None:
        return []
    out = []
    if bf.python and nf.python and _version_differs(bf.python, nf.python):
        out.append(Change("python", bf.python, nf.python, f"Python {bf.python} -> {nf.python}: every package was "
                         "rebuilt for it; rarely the cause of a slowdown on its own",
                         "rerun on the good run's Python if nothing above explains it", 12))
    if bf.has_torch and nf.has_torch:
        differs = bf.torch != nf.torch or (bf.torch_git and nf.torch_git and bf.torch_git != nf.torch_git)
        if differs:
            what = f"torch {bf.torch} -> {nf.torch}"
            if bf.torch == nf.torch:
                what += f" (build {(nf.torch_git or '')[:10]} vs {(bf.torch_git or '')[:10]})"
            says = (f"{what}: kernels, compiler and allocator all come with it; "
                    + ("could explain the throughput drop" if s.slowdown else "no symptom yet"))
            out.append(Change("torch_build", bf.torch, nf.torch, says,
                             "rerun a few hundred steps with the good run's torch build", 30 + 10 * s.slowdown))
        if bf.cuda != nf.cuda:
            out.append(Change("cuda", bf.cuda, nf.cuda, f"torch's CUDA build {bf.cuda or 'none (CPU)'} -> "
                             f"{nf.cuda or 'none (CPU)'}: other kernels and libraries",
                             "install the torch wheel built for the good run's CUDA", 28 + 10 * s.slowdown))
    return out


def _env_score(name: str, s: Symptoms) -> tuple[float, str]:
    if name == "PYTORCH_CUDA_ALLOC_CONF":
        return 25 + 15 * (s.memory_swing or s.alloc_thrash), "the CUDA allocator's behaviour"
    if name == "TORCHINDUCTOR_CACHE_DIR":
        return 15 + 25 * s.slow_start, "where compiled kernels are cached"
    if name == "CUDA_VISIBLE_DEVICES":
        return 20, "which GPUs the run uses"
    if name.startswith("NCCL_"):
        return 15 + 5 * s.slowdown, "collective communication"
    if name.startswith("TORCH_"):
        return 15 + 10 * s.recompiling, "torch's own switches"
    return 12 + 5 * s.slowdown, "CPU threads per process"


def environment(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    bf, nf = base.fingerprint, now.fingerprint
    if bf is None or nf is None or bf.env is None or nf.env is None:
        return []
    out = []
    for name in sorted(set(bf.env) | set(nf.env)):
        b, n = bf.env.get(name), nf.env.get(name)
        if b == n:
            continue
        score, about = _env_score(name, s)
        was, got = "unset" if b is None else b, "unset" if n is None else n
        says = f"{name} {was} -> {got}: changes {about}"
        out.append(Change(f"env:{name}", b, n, says, f"rerun with {name} as in the good run", score))
    return out


def _args(args: tuple[str, ...]) -> tuple[str, ...]:
    """The arguments without the interpreter's path (another venv's python is not another launch)."""
    return args[1:] if args and "python" in args[0].rsplit("/", 1)[-1] else args


def launch(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    bf, nf = base.fingerprint, now.fingerprint
    if bf is None or nf is None:
        return []
    out = []
    b_args, n_args = bf.launch_args, nf.launch_args
    if b_args is not None and n_args is not None and _args(b_args) != _args(n_args):
        gone = [a for a in _args(b_args) if a not in _args(n_args)]
        new = [a for a in _args(n_args) if a not in _args(b_args)]
        says = (f"launch arguments differ (now {' '.join(new) or 'none'} instead of {' '.join(gone) or 'none'}): "
                "batch size, sequence length or packing flags change the work per step")
        out.append(Change("launch_args", list(b_args), list(n_args), says,
                         "rerun with the good run's arguments", 30 + 5 * s.slowdown + 5 * s.padding_fell))
    if bf.files is not None and nf.files is not None:
        for path in sorted(set(bf.files) | set(nf.files)):
            b, n = bf.files.get(path), nf.files.get(path)
            if b == n or b is None:
                continue  # a file only the current run names is in the launch arguments' row
            says = f"{path} " + ("changed since the good run (another sha256)" if n else "is no longer on the "
                                 "command line") + ": the training code or its config differs"
            out.append(Change(f"file:{path}", b, n, says, f"diff {path} against the good run's copy",
                             30 + 5 * s.slowdown + 5 * s.padding_fell))
    return out


def crashes(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    if not s.fx_crash:
        return []
    step = "fix it apart (the fx_tracing alert names the remedy)"
    if s.slowdown:
        return [Change("crash:fx_tracing", None, "fx_tracing", "an FX-tracing crash explains a crash, not a "
                      "slowdown: both are present here, so the throughput drop has another cause (ranked above)",
                      f"{step}; do not chase it for the slowdown", 18)]
    return [Change("crash:fx_tracing", None, "fx_tracing", "an FX-tracing crash explains a crash, not a slowdown: "
                  "FX symbolic tracing collided with torch.compile", step, 70)]


RULES = (throughput, padding, recompiles, alloc_retries, memory, step_interval, compile_cache,
         packages, interpreter, environment, launch, crashes)


def all_changes(base: Profile, now: Profile, s: Symptoms) -> list[Change]:
    out: list[Change] = []
    for rule in RULES:
        out.extend(rule(base, now, s))
    return out
