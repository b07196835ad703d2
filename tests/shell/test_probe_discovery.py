"""Probe-file discovery has one home (issue 18): ``commands.common.find_probe_files``
over ``sources.probes.discover``/``expand``, for check/replay/live and for
``baseline save``/``diff`` alike (real files in a temporary directory)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from dflash_watch.commands.common import SettingsError, find_probe_files, load_run_settings, probe_files

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = "dflash-probe-*.jsonl"


def _run(tmp_path: Path) -> tuple[Path, Path]:
    """A log with two ranks' probe files beside it, and a job cwd with a third."""
    run, job = tmp_path / "run", tmp_path / "job"
    run.mkdir()
    job.mkdir()
    log = run / "train.log"
    log.write_text("")
    for name in ("dflash-probe-rank1.jsonl", "dflash-probe-rank0.jsonl"):
        (run / name).write_text("")
    (job / "dflash-probe-rank7.jsonl").write_text("")
    return log, job


def test_check_and_baseline_find_the_same_files_beside_the_logs(tmp_path: Path) -> None:
    log, job = _run(tmp_path)
    beside = [str(log.parent / "dflash-probe-rank0.jsonl"), str(log.parent / "dflash-probe-rank1.jsonl")]
    # baseline save/diff: beside the logs only (the job's cwd holds the current run's).
    assert find_probe_files((), [str(log)], must_match=True) == beside
    # check/replay/live: the same, then the job's working directory.
    config = tmp_path / "c.toml"
    config.write_text(f'[run]\ncwd = "{job}"\n')
    settings = load_run_settings(argparse.Namespace(config=str(config), tz="UTC", probe=[]))
    assert probe_files(settings, [str(log)]) == [*beside, str(job / "dflash-probe-rank7.jsonl")]


def test_a_named_glob_that_matches_nothing(tmp_path: Path) -> None:
    log, _ = _run(tmp_path)
    missing = str(tmp_path / "none-*.jsonl")
    assert find_probe_files([missing], [str(log)]) == []  # live: it may appear later
    with pytest.raises(SettingsError, match=r"--probe '.*none-\*\.jsonl' matches no file"):
        find_probe_files([missing], [str(log)], must_match=True)
    named = str(tmp_path / "later.jsonl")  # a plain name is kept: the reader reports it missing
    assert find_probe_files([named], [str(log)], must_match=True) == [named]


def test_the_default_probe_glob_is_spelled_in_one_place() -> None:
    """A second copy of the discovery (``baseline_env.probe_files`` had one)
    shows as a second ``"dflash-probe-*.jsonl"`` constant in code."""
    homes = []
    for path in sorted((ROOT / "dflash_watch").rglob("*.py")):
        if path.is_relative_to(ROOT / "dflash_watch" / "parsers") or path.is_relative_to(
                ROOT / "dflash_watch" / "detectors"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Constant) and n.value == DEFAULT for n in ast.walk(tree)):
            homes.append(path.relative_to(ROOT).as_posix())
    assert homes == ["dflash_watch/sources/probes.py"]
