"""The demo's staged environments: the good run's and the rebuilt one.

The story our first user lived: after an environment rebuild, transformers
went 5.8.1 -> 5.6.0, accelerate was missing, torch came with another CUDA
build and the compile cache was 925 KB where the good run's held 353 MB;
at the same time length bucketing broke. The demo has no such venvs, so it
stages them as files, exactly as the fingerprint reads real ones: a
``pyvenv.cfg``, ``lib/pythonX.Y/site-packages/<name>-<version>.dist-info/
METADATA`` per package and ``torch/version.py``; and a compile cache
directory with a few hundred KB in it. The good run's fingerprint is read
from its staged venv by the real ``fingerprint_of_env`` and saved, with
the good run's figures, as the demo's baseline file; the diagnosis screen
reads the rebuilt venv the same way. Nothing here is a shortcut around the
code a real run goes through: only the environments are made up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .story import STORY, Story

PYTHON = "3.11"
GOOD_PACKAGES = {
    "torch": "2.9.1+cu128", "transformers": "5.8.1", "accelerate": "1.12.0", "datasets": "4.4.1",
    "tokenizers": "0.22.1", "safetensors": "0.7.0", "numpy": "2.3.5", "triton": "3.5.1",
    "flash-attn": "2.8.3", "wandb": "0.23.0",
}
# The rebuild: transformers downgraded, accelerate gone, torch with another CUDA.
NOW_PACKAGES = {
    **{k: v for k, v in GOOD_PACKAGES.items() if k != "accelerate"},
    "torch": "2.9.1+cu126", "transformers": "5.6.0",
}
TORCH_CUDA = {"2.9.1+cu128": "12.8", "2.9.1+cu126": "12.6"}
GOOD_CACHE_BYTES = 353 * 1024 * 1024
GOOD_CACHE_ENTRIES = 4120
NOW_CACHE_BYTES = 925 * 1024  # what the rebuilt run's cache held
NOW_CACHE_FILES = 37


@dataclass(frozen=True, slots=True)
class Staged:
    """Where the staged pieces are."""

    good_env: Path
    now_env: Path
    now_cache: Path
    baseline: Path


def _venv(root: Path, packages: dict[str, str]) -> Path:
    site = root / "lib" / f"python{PYTHON}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (root / "pyvenv.cfg").write_text(f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {PYTHON}.11\n")
    for name, version in packages.items():
        dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
        dist.mkdir(exist_ok=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    torch = packages.get("torch")
    if torch:
        (site / "torch").mkdir(exist_ok=True)
        (site / "torch" / "version.py").write_text(
            f"__version__ = '{torch}'\ndebug = False\ncuda = '{TORCH_CUDA.get(torch)}'\n"
            "git_version = 'c5b4f6e0d1a9e2b3c4d5e6f7a8b9c0d1e2f3a4b5'\nhip = None\n"
        )
    return root


def _cache(root: Path) -> Path:
    """A cold inductor cache: a few dozen small artefacts."""
    root.mkdir(parents=True, exist_ok=True)
    each = NOW_CACHE_BYTES // NOW_CACHE_FILES
    for i in range(NOW_CACHE_FILES):
        sub = root / f"c{i % 7:02x}"
        sub.mkdir(exist_ok=True)
        (sub / f"k{i:04d}.py").write_bytes(b"#" * each)
    return root


def good_profile(story: Story = STORY) -> dict[str, Any]:
    """The figures of the good run (the run before the rebuild), as a baseline file holds them."""
    return {
        "throughput_tokens_per_s": 21_500.0,
        "throughput_p10": 20_600.0,
        "throughput_p90": 22_900.0,
        "step_interval_s": round(story.tokens_per_step / story.healthy_tokens_per_s, 2),
        "padding_efficiency": story.healthy_pad_eff,
        "recompiles_per_hour": 0.0,
        "alloc_retries_per_hour": 0.0,
    }


def stage(out: Path, story: Story = STORY) -> Staged:
    """Write both environments, the cold cache and the good run's baseline under ``out``."""
    from ..baseline.fingerprint import fingerprint_of_env
    from ..baseline.store import Baseline, save_baseline

    good = _venv(out / "envs" / "good", GOOD_PACKAGES)
    now = _venv(out / "envs" / "rebuilt", NOW_PACKAGES)
    cache = _cache(out / "envs" / "inductor-cache")
    fingerprint = fingerprint_of_env(good, cache_dir=str(cache)).to_dict()
    # The good run's cache was warm; the staged directory is the rebuilt one's.
    fingerprint["compile_cache"] = {"path": "/tmp/torchinductor_dflash", "bytes": GOOD_CACHE_BYTES,
                                    "entries": GOOD_CACHE_ENTRIES}
    fingerprint["env"] = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "OMP_NUM_THREADS": "8"}
    figures = good_profile(story)
    extra = {k: v for k, v in figures.items() if k != "throughput_tokens_per_s"}
    extra["fingerprint"] = fingerprint
    extra["note"] = "staged by dflash-watch demo: the good run before the environment rebuild"
    baseline_path = out / "dflash-baseline.json"
    save_baseline(Baseline(figures["throughput_tokens_per_s"], extra), baseline_path)
    return Staged(good, now, cache, baseline_path)


def rebuilt_fingerprint(staged: Staged) -> dict[str, Any]:
    """The rebuilt environment as the diagnosis sees it (read now, like a real run's)."""
    from ..baseline.fingerprint import fingerprint_of_env

    fingerprint = fingerprint_of_env(staged.now_env, cache_dir=str(staged.now_cache)).to_dict()
    # The rebuilt run was started without the allocator setting the good run had.
    fingerprint["env"] = {"OMP_NUM_THREADS": "8"}
    return fingerprint


def cache_env(staged: Staged) -> dict[str, str]:
    """The simulated job's environment: its compile cache is the staged one."""
    return {"TORCHINDUCTOR_CACHE_DIR": os.fspath(staged.now_cache)}
