"""The ranking of "what changed" on labelled synthetic runs of each kind.

Each case is a good run's profile, a broken run's profile and the alerts
that fired; the expected first change and the words it must say are the
issue's rules (padding first when throughput drops with swinging memory,
compilation first when recompiles rise, a cold cache explains slow first
steps only, an FX crash explains a crash and not a slowdown, data-path
packages above unrelated ones).
"""

from __future__ import annotations

import doctest
import importlib

import pytest

from dflash_watch.detectors.diagnosis import rank_changes, suspects_for
from dflash_watch.detectors.diagnosis_profile import Profile

GIB = float(1 << 30)


def env(**over):
    fp = {"python": "3.11.7", "torch": "2.9.0+cu128", "torch_git": "abc", "cuda": "12.8",
          "packages": {"transformers": "5.8.1", "accelerate": "1.10.0", "datasets": "4.0.0", "rich": "13.0.0",
                       "numpy": "2.1.0"},
          "env": {"OMP_NUM_THREADS": "8"}, "files": {"train.py": "aa", "cfg.yaml": "bb"},
          "launch_args": ["/venv/bin/python", "train.py", "--config", "cfg.yaml"],
          "compile_cache": {"path": "/tmp/torchinductor_u", "bytes": 353e6, "entries": 4100}}
    for k, v in over.items():
        fp[k] = v
    return fp


def run(tps=21500.0, pad=0.93, band=0.05, rec=0.5, warm=9000.0, fp=None, **more):
    return {"version": 1, "throughput_tokens_per_s": tps, "padding_efficiency": pad, "recompiles_per_hour": rec,
            "warmup_throughput_tokens_per_s": warm, "step_interval_s": 3.0,
            "gpu_memory": {"0": {"level_bytes": 60 * GIB, "band_bytes": band * GIB}},
            "fingerprint": fp or env(), **more}


GOOD = run()
STORY_PACKAGES = {"transformers": "5.6.0", "datasets": "4.0.0", "rich": "14.0.0", "numpy": "2.1.0"}


def whats(changes):
    return [c.what for c in changes]


def test_padding_broke_puts_padding_first_with_the_bucket_step() -> None:
    bad = run(tps=4300.0, pad=0.41, band=12.0, fp=env(packages=STORY_PACKAGES))
    changes = rank_changes(GOOD, bad, ["throughput_drop", "memory_volatility", "padding"])
    first = changes[0]
    assert first.what == "padding_efficiency" and (first.baseline, first.now) == (0.93, 0.41)
    assert first.says == ("padding efficiency 41% vs 93% in the good run: batches are padded far more "
                          "(bucketing broken?); explains the throughput drop and the swinging memory")
    assert first.next_step.startswith("print the bucket boundaries the loader uses")
    # The data path's packages above the unrelated one; the symptoms are listed, not suspected.
    order = whats(changes)
    assert order.index("package:transformers") < order.index("package:rich")
    assert order.index("package:accelerate") < order.index("package:rich")
    accelerate = changes[order.index("package:accelerate")]
    assert (accelerate.baseline, accelerate.now) == ("1.10.0", None)
    assert "accelerate 1.10.0 -> missing: on the data path" in accelerate.says
    assert {"throughput", "memory_flatness"} <= set(order)
    flat = changes[order.index("memory_flatness")]
    assert flat.gpu == 0 and flat.to_dict()["gpu"] == 0
    suspects = suspects_for(GOOD, bad, ["throughput_drop", "memory_volatility"])
    assert [s["what"] for s in suspects][0] == "padding_efficiency" and len(suspects) == 3
    assert not {"throughput", "memory_flatness"} & {s["what"] for s in suspects}


def test_rising_recompiles_put_compilation_first() -> None:
    bad = run(tps=9000.0, rec=240.0, fp=env(packages={**env()["packages"], "rich": "14.0.0"}))
    changes = rank_changes(GOOD, bad, ["throughput_drop", "recompile"])
    assert changes[0].what == "recompiles" and changes[0].now == 240.0
    assert changes[0].says.startswith("recompiles 240/h vs 0.5/h in the good run: torch.compile keeps compiling")
    assert changes[0].says.endswith("explains the throughput drop")
    assert "TORCH_LOGS=recompiles" in changes[0].next_step


def test_environment_drift_only_ranks_the_data_path_first() -> None:
    fp = env(packages=STORY_PACKAGES, env={"OMP_NUM_THREADS": "4"},
             launch_args=["/other/venv/bin/python", "train.py", "--config", "cfg.yaml"])
    changes = rank_changes(GOOD, run(fp=fp), [])
    order = whats(changes)
    assert order[:2] == ["package:accelerate", "package:transformers"], order
    assert changes[1].says == "transformers 5.8.1 -> 5.6.0: on the data path (tokenization, collation, batching); no symptom yet"
    assert changes[1].next_step.startswith("pip install transformers==5.8.1")
    rich = changes[order.index("package:rich")]
    assert rich.says.endswith("not on the data path, unlikely to explain the symptom")
    assert "env:OMP_NUM_THREADS" in order
    # Another venv's interpreter is not another launch; nothing in the run changed.
    assert "launch_args" not in order and not {"throughput", "padding_efficiency", "compile_cache"} & set(order)


def test_a_cold_cache_explains_slow_first_steps_only() -> None:
    cold = env(compile_cache={"path": "/tmp/torchinductor_u", "bytes": 925e3, "entries": 12})
    slow_start = rank_changes(GOOD, run(warm=1500.0, fp=cold), [])
    assert slow_start[0].what == "compile_cache"
    assert slow_start[0].baseline == {"bytes": 353e6, "entries": 4100}
    assert slow_start[0].says.startswith("compile cache 925 KB vs 353 MB in the good run: a cold cache explains "
                                         "the slow first steps")
    both = rank_changes(GOOD, run(tps=9000.0, warm=1500.0, fp=cold), ["throughput_drop"])
    assert both[0].what == "compile_cache" and both[0].says.endswith("; not the steady drop after warm-up")
    # A steady drop after warm-up (first steps as fast as before): the cache is not the cause.
    steady = rank_changes(GOOD, run(tps=9000.0, fp={**cold, "torch": "2.8.0+cu128"}), ["throughput_drop"])
    order = whats(steady)
    cache = steady[order.index("compile_cache")]
    assert cache.says.endswith("a cold compile cache explains slow first steps, not a steady drop after warm-up")
    assert order.index("torch_build") < order.index("compile_cache")


def test_an_fx_crash_explains_a_crash_not_a_slowdown() -> None:
    bad = run(tps=4300.0, pad=0.41)
    changes = rank_changes(GOOD, bad, ["throughput_drop", "fx_tracing"])
    order = whats(changes)
    assert order[0] == "padding_efficiency"
    crash = changes[order.index("crash:fx_tracing")]
    assert crash.says.startswith("an FX-tracing crash explains a crash, not a slowdown: both are present here")
    assert order.index("crash:fx_tracing") > order.index("padding_efficiency")
    # The crash alone: it is the first thing to explain.
    alone = rank_changes(GOOD, run(), ["fx_tracing"])
    assert alone[0].what == "crash:fx_tracing" and "explains a crash, not a slowdown" in alone[0].says


def test_old_and_odd_profiles_compare_only_what_both_know() -> None:
    old = {"version": 1, "throughput_tokens_per_s": 21500.0}
    assert whats(rank_changes(old, run(tps=4300.0), ["throughput_drop"])) == ["throughput"]
    odd = {"throughput_tokens_per_s": "fast", "padding_efficiency": 7, "gpu_memory": {"0": "x"},
           "fingerprint": {"packages": ["not", "a", "map"], "env": None}}
    assert Profile.from_mapping(odd) == Profile(fingerprint=Profile.from_mapping(odd).fingerprint)
    assert rank_changes(odd, run(), []) == []
    # A venv seen without a process (no env, files, args): those are not "changed".
    no_process = {k: v for k, v in env().items() if k not in ("env", "files", "launch_args")}
    assert rank_changes(GOOD, run(fp=no_process), []) == []
    # Python seen at two precisions is one Python.
    assert rank_changes(GOOD, run(fp=env(python="3.11")), []) == []
    assert whats(rank_changes(GOOD, run(fp=env(python="3.12.1")), [])) == ["python"]


@pytest.mark.parametrize("name", ["dflash_watch.detectors.diagnosis", "dflash_watch.detectors.diagnosis_profile"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_a_compile_cache_empty_in_both_runs_is_no_change() -> None:
    """The helper's diff listed ``compile cache 0 B vs 0 B in the good
    run: not cold`` (no compile in either run): as it was is no change."""
    empty = env(compile_cache={"path": "/tmp/torchinductor_u", "bytes": 0.0, "entries": 0.0})
    assert "compile_cache" not in whats(rank_changes(run(fp=empty), run(tps=9000.0, fp=empty), ["throughput_drop"]))
    grown = env(compile_cache={"path": "/tmp/torchinductor_u", "bytes": 5e6, "entries": 40.0})
    assert "compile_cache" in whats(rank_changes(run(fp=empty), run(fp=grown), []))  # a change is still said


def test_throughput_in_other_units_is_said_not_comparable_not_no_change() -> None:
    """A baseline of it/s against a run of tokens/s: the diff said "no
    change" (exit 0), a healthy verdict on nothing compared."""
    changes = rank_changes(run(throughput_unit="it/s", tps=30.0), run(throughput_unit="tok/s", tps=9000.0), [])
    (tp,) = [c for c in changes if c.what == "throughput"]
    assert "other units, not comparable" in tp.says and tp.symptom
    faster = rank_changes(GOOD, run(tps=30000.0), [])
    assert [c.next_step for c in faster if c.what == "throughput"] == ["none needed"]


def test_recompiles_without_a_rate_say_so_in_words() -> None:
    changes = rank_changes(run(rec=None), run(rec=None), ["recompile"])
    (rec,) = [c for c in changes if c.what == "recompiles"]
    assert rec.says.startswith("recompiles: the recompile alert fired (the run is too short for a rate per hour): ")
