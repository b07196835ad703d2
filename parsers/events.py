"""Typed events that flow from parsers and sources into detectors.

Every event carries an explicit ``time`` (seconds since the epoch, on the
clock of the data) so that detectors never need a clock of their own, and a
``source`` (``file:line`` or ``gpu-samples``) so that an alert can cite its
evidence. Events are frozen so that one object can be shared by the
Monitor, every detector and the TUI without defensive copies.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Final, Literal, Union

# The units a run's rate is printed in (``Progress.rate_unit``), from the
# most telling: tokens, samples, steps. One home; every module names them so.
RateUnit = Literal["tok/s", "samples/s", "it/s"]
TOK_S: Final = "tok/s"
SAMPLES_S: Final = "samples/s"
IT_S: Final = "it/s"


@dataclass(frozen=True, slots=True)
class Progress:
    """One progress report of the training loop (a step line, an HF dict...).

    Any field may be None: HF dicts have loss but no tokens/s, nanochat
    lines have tokens/s but no total; detectors use what is there.
    """

    time: float
    source: str
    step: int | None = None
    total_steps: int | None = None
    tokens_per_s: float | None = None
    loss: float | None = None
    rank: int | None = None
    # Other numbers of the line (lr, grad_norm, acceptance, padding...), by
    # their name in the log. A tuple of pairs keeps the event hashable-free of
    # mutable state while staying cheap to build.
    metrics: tuple[tuple[str, float], ...] = ()
    # Seconds per step where the log says so (step_avg, dt, ms/iteration,
    # tqdm s/it): the stall detector's sense of "usual step interval".
    step_seconds: float | None = None
    # False when the line had no timestamp of its own and took an earlier
    # one: its time may be far behind the truth (nanochat or HF dict lines
    # between rare logger lines), so durations must not be measured on it.
    clocked: bool = True
    # The rate the run itself prints, in its own unit (``rate_unit``:
    # "tok/s", "samples/s", "it/s"; s/it and step times are turned into
    # "it/s"). ``tokens_per_s`` stays the tokens rate where the line gives
    # one (or tokens per sample/step are known). Detectors judge
    # ``rate_of(event)``: the rate the run has, whatever its unit.
    rate: float | None = None
    rate_unit: str | None = None
    # tqdm's own elapsed counter (``[05:45<12:07, ...]``) in seconds: the
    # clock of a log that has no timestamps (replay only).
    elapsed_s: float | None = None

    def metric(self, name: str) -> float | None:
        for key, value in self.metrics:
            if key == name:
                return value
        return None


def _progress_builder() -> type:
    """``new_progress``: a twin of ``Progress`` (same slots, same
    ``__init__`` arguments and defaults) that is not frozen, and whose
    ``__init__`` turns what it made into a ``Progress`` once its fields are
    set.

    A frozen dataclass sets each field through ``object.__setattr__``: 13
    calls that made one event cost ~1 us, five times what a plain slotted
    ``__init__`` costs, and the stream builds one per progress line (and
    again where a clock retimes it). The twin's ``__init__`` stores the
    fields as any class does, then assigns ``__class__`` (allowed: the two
    classes have the same slots on the same base). What comes out is a
    ``Progress`` in every way: its type, equality, hash, frozenness
    (tests/core/test_parse_speed_shortcuts.py). The ``__init__`` is written
    from ``Progress``'s fields, as ``dataclasses`` writes one: one statement
    more than a dataclass's, and no ``__post_init__`` call per event."""
    names = [f.name for f in fields(Progress)]
    params = []
    namespace: dict[str, object] = {"_Progress": Progress}
    for f in fields(Progress):
        if f.default_factory is not MISSING or not f.init or f.kw_only:
            raise TypeError(f"new_progress: Progress.{f.name} needs dataclasses' own __init__")
        if f.default is MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    body = "".join(f"    self.{name} = {name}\n" for name in names)
    exec(f"def __init__(self, {', '.join(params)}):\n{body}    self.__class__ = _Progress\n", namespace)
    return type("_ProgressBuilt", (), {"__slots__": tuple(names), "__init__": namespace["__init__"]})


def _compiled_builder() -> object | None:
    """``build_progress`` of the compiled kernels (``parsers.native``), told
    ``Progress``'s fields, or None where they were not built: the same
    arguments and the same object as the Python builder, in half its
    time (it stores each field through its slot in C: 160 ns, not 310)."""
    from .native import KERNELS

    if KERNELS is None:
        return None
    made = fields(Progress)
    slots = vars(Progress)
    KERNELS.set_progress(
        Progress,
        tuple(f.name for f in made),
        tuple(slots[f.name] for f in made),
        tuple(None if f.default is MISSING else f.default for f in made),
        sum(f.default is MISSING for f in made),
    )
    return KERNELS.build_progress


# ``Progress(...)``: same arguments, same result, in a quarter of the time
# (``_progress_builder``), or less where the kernels are built
# (``_compiled_builder``). The constructor of the parsers' hot paths; typed
# as ``Progress`` itself, so its arguments are checked as Progress's.
if TYPE_CHECKING:
    new_progress = Progress
else:
    # (The Python builder checks that every field is one it can build.)
    new_progress = _progress_builder()
    new_progress = _compiled_builder() or new_progress


@dataclass(frozen=True, slots=True)
class Frame:
    """One ``File "...", line N, in func`` entry of a Python traceback."""

    file: str
    line: int
    function: str
    code: str = ""


@dataclass(frozen=True, slots=True)
class Crash:
    """A fatal error seen in a log: a traceback or a one-line fatal signal.

    ``detector`` is ``fx_tracing`` or ``crash`` (CONTRACTS section 4) and
    ``kind`` the finer class (``cuda_oom``, ``nccl_timeout``...). ``cause``
    is finer still where the text tells more than the contract's kind
    (``slurm_time_limit`` under ``killed``, ``disk_full`` under
    ``exception``). ``signature`` identifies "the same crash" across ranks
    and across relaunches: exception type plus the innermost frames.
    """

    time: float
    source: str
    detector: str
    kind: str
    exc_type: str
    message: str
    signature: str
    rank: int | None = None
    cause: str | None = None
    frames: tuple[Frame, ...] = ()
    text: tuple[str, ...] = ()
    thread: str | None = None


@dataclass(frozen=True, slots=True)
class Recompile:
    """torch.compile recompiled a function, or hit its recompile limit."""

    time: float
    source: str
    function: str | None
    reason: str | None
    limit: int | None = None
    hit_limit: bool = True
    fatal: bool = False
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_bytes: int
    name: str = ""
    # True when the pid belongs to the managed job's process tree (the
    # sampler's ``job_pids``): tells the job's memory from anyone else's.
    job: bool = False


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One memory sample of one GPU (CONTRACTS section 3).

    ``used_bytes``/``total_bytes`` are None when the driver could not say
    (NotSupported and friends): a missing value is not a zero.
    """

    time: float
    gpu: int
    used_bytes: int | None
    total_bytes: int | None
    util: float | None = None
    processes: tuple[GpuProcess, ...] | None = None
    source: str = "gpu-samples"
    # -- health (CONTRACTS section 3, added by issue 19) --------------------
    # Each is None when the card or driver does not say (NotSupported): a
    # missing read is absent, never an error and never a zero.
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    # Active clocks-throttle reasons by name: ``thermal``, ``power_cap``,
    # ``hw_slowdown``, ``power_brake``, ``sw_thermal`` (idle/app-clock
    # reasons are not degradation and are left out).
    throttle: tuple[str, ...] | None = None
    # Volatile uncorrected ECC errors (a count since the driver loaded).
    ecc_uncorrected: int | None = None
    remap_pending: bool | None = None
    retired_pages: int | None = None
    # Xid codes seen since the previous sample of this GPU.
    xid: tuple[int, ...] | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    lost: bool | None = None


@dataclass(frozen=True, slots=True)
class GpuLost:
    """NVML reported a GPU as lost (fallen off the bus)."""

    time: float
    gpu: int
    message: str
    source: str = "nvml"


@dataclass(frozen=True, slots=True)
class ProcessExit:
    """The managed training process exited (CONTRACTS ``process_exit``).

    ``kind`` is ``crash``, ``clean``, ``killed`` or ``aborted`` (the user
    asked: ``asked`` names the action, ``abort`` or ``relaunch``).
    """

    time: float
    kind: str
    code: int | None = None
    signal: int | None = None
    signature: str | None = None
    source: str = "tmux"
    asked: str | None = None


@dataclass(frozen=True, slots=True)
class Tick:
    """The clock moved without data: lets silence-driven detectors fire."""

    time: float


@dataclass(frozen=True, slots=True)
class Quiet:
    """Every followed log has been quiet (no new bytes) since ``since``.

    Live only: lets a detector that holds alerts back to merge copies from
    several ranks (crash) send them as soon as nothing more is coming,
    instead of after a fixed hold. ``time`` is the clock when it was seen.
    """

    time: float
    since: float


@dataclass(frozen=True, slots=True)
class Delivery:
    """Live: how one log's lines reach the watcher.

    ``burst_s`` > 0: they arrive in bursts about that many seconds apart
    (a block-buffered writer: ``python train.py > log``, ``| tee`` without
    ``-u``), so a silence shorter than a few bursts is the buffer, not the
    run; 0: line by line again. Made by the shell, which alone sees when
    bytes arrive; a detector that judges silence takes it into account.
    """

    time: float
    source: str
    burst_s: float


@dataclass(frozen=True, slots=True)
class Renumbered:
    """Live: the lines of the log ``source`` names are counted from 1 again.

    The file was truncated or deleted and made anew (a relaunch), or
    rotated and followed to its new file: its line numbers start over while
    the name stays. A detector that orders a file's lines by their numbers
    (a step line after a traceback proves the run went on) must not compare
    the new lines with the old ones, whose numbers are larger: the steps of
    the run before would prove a crash on line 5 of the new file survived.
    Made by the shell, which alone sees where a file's lines begin again;
    replay reads each file whole and never sends it. ``time`` is the
    Monitor's clock when it was seen (it moves no clock).
    """

    time: float
    source: str


@dataclass(frozen=True, slots=True)
class ProbeSample:
    """One probe line (CONTRACTS section 9) from ``dflash_watch.probe``.

    Written by the training process itself, one line per step (or per few
    steps) per rank. Every figure may be None: a CPU run has no CUDA
    allocator figures, a loop that passes no attention mask has no padded
    count. A missing figure is absent, never zero.
    """

    time: float
    rank: int | None = None
    step: int | None = None
    tokens: int | None = None
    padded_tokens: int | None = None
    batch_size: int | None = None
    seq_len: int | None = None
    # Cumulative counters of the process (torch.cuda.memory_stats and
    # dynamo's counters): detectors look at their rise between lines.
    alloc_retries: int | None = None
    reserved_bytes: int | None = None
    allocated_bytes: int | None = None
    inactive_split_bytes: int | None = None
    recompiles: int | None = None
    graph_breaks: int | None = None
    source: str = "probe"
    # -- training health (CONTRACTS section 9, added by issue 19) -----------
    loss: float | None = None
    grad_norm: float | None = None
    loss_scale: float | None = None
    # Wall seconds of the whole step, of its own compute, and of waiting
    # (collectives, the data loader): under DDP every rank's step takes the
    # same time, so the split is what names a slow rank.
    step_seconds: float | None = None
    compute_seconds: float | None = None
    wait_seconds: float | None = None

    @property
    def padding_efficiency(self) -> float | None:
        """Real tokens / padded tokens of this batch, when both are known."""
        if self.tokens is None or not self.padded_tokens or self.padded_tokens <= 0:
            return None
        return min(1.0, self.tokens / self.padded_tokens)


@dataclass(frozen=True, slots=True)
class PaddingReport:
    """A log line that states padding efficiency (``pad_eff 0.93``,
    ``padding_ratio``, ``num_padding_tokens`` with a token count).

    ``efficiency`` is real tokens / padded tokens, 0..1, however the line
    put it (a padding ratio of 0.07 is an efficiency of 0.93).
    """

    time: float
    efficiency: float
    source: str
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class Overflow:
    """fp16 dynamic loss scaling skipped a step (issue 19, ``loss/overflow``).

    DeepSpeed ``OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536,
    reducing to 32768``, apex ``Gradient overflow.  Skipping step, loss
    scaler 0 reducing loss scale to 32768.0`` and Megatron's forms. One
    overflow is normal; a storm of them (every step skipped, the scale at
    its floor) is the alert. ``scale`` is the scale that overflowed,
    ``new_scale`` the one it fell to, where the line says.
    """

    time: float
    source: str
    rank: int | None = None
    scale: float | None = None
    new_scale: float | None = None


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A line that says where a rank waits, without a new step.

    Watchdogs and heartbeats ("no step for 60 s (last step 537), waiting in
    all_reduce", NCCL/gloo "waiting for" lines) repeat the last step: they
    are not progress (the stall must not be delayed by them) but evidence
    of where each rank is, which names the hung rank. ``last_step`` is the
    step the rank last finished, ``waiting_in`` the collective or phase it
    waits in, where the line says.
    """

    time: float
    source: str
    rank: int | None = None
    last_step: int | None = None
    waiting_in: str | None = None


@dataclass(frozen=True, slots=True)
class Phase:
    """The run entered or left a phase that legitimately prints no step.

    ``phase`` is ``eval`` (HF "***** Running Evaluation *****", eval bars,
    Lightning's validation bar) or ``checkpoint`` ("Saving model checkpoint
    to", torch.distributed.checkpoint); ``begin`` True on entry, False when
    it is known to be over (the next training step also ends it).
    """

    time: float
    source: str
    phase: str
    begin: bool = True
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class XidError:
    """An Xid error of one GPU: from NVML's event set or the kernel's
    ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus``.

    ``gpu`` is the NVML index where it is known (the kernel names the PCI
    bus id; the shell maps it), else None.
    """

    time: float
    code: int
    gpu: int | None = None
    message: str = ""
    pci_bus: str | None = None
    source: str = "nvml"


def rate_of(event: Progress) -> tuple[float | None, str]:
    """(rate, unit) of a progress event: its own rate, else its tokens/s."""
    if event.rate is not None:
        return event.rate, event.rate_unit or TOK_S
    return event.tokens_per_s, TOK_S


Event = Union[  # noqa: UP007 - one alias the detectors and the registry read
    Progress,
    Crash,
    Recompile,
    GpuSample,
    GpuLost,
    ProcessExit,
    Tick,
    Quiet,
    ProbeSample,
    PaddingReport,
    Delivery,
    Renumbered,
    Overflow,
    Heartbeat,
    Phase,
    XidError,
]
