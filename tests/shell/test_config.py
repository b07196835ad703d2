"""The config file as a user meets it: the template `init` writes, and the
one-line errors a wrong value gets (real processes, real files)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from dflash_watch.config import (
    DETECTOR_ALIASES,
    DETECTOR_DERIVED,
    DETECTOR_KEYS,
    GPU_RANGES,
    RUN_RANGES,
    ConfigError,
    GpuConfig,
    RunConfig,
    check_detectors,
    load_config,
)
from dflash_watch.config_template import example_config
from dflash_watch.detectors.config import DetectorConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_LINE = re.compile(r"^#\s*([A-Za-z_][A-Za-z0-9_]*\s*=.*)$")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command in ``cwd`` with HOME there too: no config of the machine's leaks in."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "HOME": str(cwd), "XDG_STATE_HOME": str(cwd / "state"), "PYTHONPATH": path}
    env.pop("XDG_CONFIG_HOME", None)  # the machine's config home stays out too: ~/.config is in cwd
    return subprocess.run(
        [sys.executable, "-m", "dflash_watch.cli", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env, check=False,
    )


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def a_log(tmp_path: Path) -> Path:
    log = tmp_path / "train.log"
    log.write_text("2026-11-29 10:00:00 step 1/10 | 21.5 Ktok/s\n")
    return log


# -- one declaration for every field -----------------------------------------------


def test_every_detector_field_is_declared_once_as_a_knob() -> None:
    """A field added to DetectorConfig without ``knob`` (range and doc) fails
    here: DETECTOR_KEYS is read from the knobs, nothing else declares them."""
    knobs = [f.name for f in fields(DetectorConfig) if "valid" in f.metadata]
    assert list(DETECTOR_KEYS) == knobs  # derived, in declaration order
    plain = [f.name for f in fields(DetectorConfig) if f.name not in knobs]
    assert plain == list(DETECTOR_DERIVED), f"declare these DetectorConfig fields with knob(): {plain}"
    assert all(target in DETECTOR_KEYS for target in DETECTOR_ALIASES.values())
    for f in fields(DetectorConfig):
        if f.name in DETECTOR_KEYS:
            spec = DETECTOR_KEYS[f.name]
            assert spec.doc == f.metadata["doc"] and spec.range.bounds() == f.metadata["valid"], f.name


@pytest.mark.parametrize("text", ["> 0", ">= 0", "(0, 1)", "(0, 1]", "[0, 1]", "[0, 1)", "whole >= 1",
                                  "whole >= 0", ">= 1", "> 1", "[-2.5, 3]"])
def test_a_range_reads_back_as_the_template_spells_it(text: str) -> None:
    from dflash_watch.checks import Range

    assert Range.parse(text).bounds() == text


@pytest.mark.parametrize("text", ["", "0..1", "> x", "(0, 1", "whole"])
def test_a_range_that_is_not_one_is_refused(text: str) -> None:
    from dflash_watch.checks import Range

    with pytest.raises(ValueError, match="not a range"):
        Range.parse(text)


@pytest.mark.parametrize("cls, ranges", [(RunConfig, RUN_RANGES), (GpuConfig, GPU_RANGES)])
def test_every_numeric_run_and_gpu_key_has_a_declared_range(cls: type, ranges: dict) -> None:
    from dflash_watch.config import _kind

    numeric = [f.name for f in fields(cls) if _kind(str(f.type)) in ("int", "float")]  # optional ones too
    assert sorted(numeric) == sorted(ranges), f"{cls.__name__}: declare ranges for {set(numeric) ^ set(ranges)}"


@pytest.mark.parametrize("cls", [RunConfig, GpuConfig])
def test_every_run_and_gpu_field_has_a_known_kind(cls: type) -> None:
    """A new field of a type the checker does not know would be a traceback for the user."""
    from dflash_watch.config import _kind

    for f in fields(cls):
        assert _kind(str(f.type)) in ("bool", "float", "int", "dict", "tuple", "str")


def test_every_default_is_inside_its_range_and_the_edges_are_refused() -> None:
    defaults = DetectorConfig()
    for name, spec in DETECTOR_KEYS.items():
        default = getattr(defaults, name)
        assert spec.range.problem(default) is None, f"{name} default {default} outside {spec.range}"
        assert check_detectors({name: default}) == {name: default}
        r = spec.range
        outside = [r.low if r.low_open else r.low - 1]
        if not math.isinf(r.high):
            outside.append(r.high if r.high_open else r.high + 1)
        for value in outside:
            if math.isinf(value):
                continue
            with pytest.raises(ConfigError, match=re.escape(f"[detectors] {name} = ")) as exc:
                check_detectors({name: value})
            assert str(exc.value).endswith(f"must be {r}"), exc.value


# -- the template -------------------------------------------------------------------


def uncomment_examples(text: str) -> tuple[str, int]:
    """Every ``# key = value`` line of the template, uncommented."""
    out, count = [], 0
    for line in text.splitlines():
        m = EXAMPLE_LINE.match(line)
        if m:
            out.append(m.group(1))
            count += 1
        else:
            out.append(line)
    return "\n".join(out) + "\n", count


def test_every_commented_key_of_the_template_loads(tmp_path: Path) -> None:
    out = cli("init", "dfw.toml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = (tmp_path / "dfw.toml").read_text()
    assert written == example_config()
    text, count = uncomment_examples(written)
    # Every threshold is in the template, commented, with its default.
    assert count >= len(DETECTOR_KEYS) + 10, count
    (tmp_path / "all.toml").write_text(text)
    cfg = load_config(tmp_path / "all.toml")
    assert sorted(cfg.detectors) == sorted(DETECTOR_KEYS)
    assert cfg.tz == "UTC" and cfg.run.socket == "dflash" and cfg.gpu.indices == tuple(range(8))
    assert cfg.run.env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    from dflash_watch.keymap import KEY_BINDINGS

    assert cfg.keys == {name: spec.default for name, spec in KEY_BINDINGS.items()}  # every binding, documented
    # The real command reads it whole: thresholds, progress regex, time zone,
    # and the baseline file it names.
    (tmp_path / "dflash-baseline.json").write_text('{"version": 1, "throughput_tokens_per_s": 21500.0}')
    out = cli("replay", "--json", "--config", "all.toml", str(a_log(tmp_path)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_a_file_from_the_old_template_still_loads(tmp_path: Path) -> None:
    """The first template printed `throughput_drop_fraction`; such files keep working."""
    (tmp_path / "old.toml").write_text("[detectors]\nthroughput_drop_fraction = 0.4\n")
    assert load_config(tmp_path / "old.toml").detectors == {"throughput_drop_frac": 0.4}


# -- wrong values: one line naming the key ------------------------------------------


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[detectors]\nthroughput_drop_fraction = 1.5\n",
         "dflash-watch: [detectors] throughput_drop_fraction = 1.5: must be in (0, 1)"),
        ("[detectors]\nthroughput_drop_frac = 0\n", "dflash-watch: [detectors] throughput_drop_frac = 0: must be in (0, 1)"),
        ("[detectors]\nstall_factor = \"5\"\n", 'dflash-watch: [detectors] stall_factor = "5": must be a number'),
        ("[detectors]\nstall_factor = true\n", "dflash-watch: [detectors] stall_factor = true: must be a number"),
        ("[detectors]\nstall_factor = 1\n", "dflash-watch: [detectors] stall_factor = 1: must be > 1"),
        ("[detectors]\nstall_min_s = nan\n", "dflash-watch: [detectors] stall_min_s = NaN: must be a finite number"),
        ("[detectors]\nvolatility_min_turns = 2.5\n",
         "dflash-watch: [detectors] volatility_min_turns = 2.5: must be a whole number"),
        ("[detectors]\ncrash_frames = 0\n", "dflash-watch: [detectors] crash_frames = 0: must be a whole number >= 1"),
        ("[detectors]\nthroughput_drop = 0.3\n",
         "dflash-watch: [detectors] throughput_drop: unknown key (did you mean throughput_drop_frac?)"),
        ("[detectors]\ntz = \"UTC\"\n", "dflash-watch: [detectors] tz: not a threshold; set the top-level tz key instead"),
        ("[detectors]\nthroughput_drop_frac = 0.3\nthroughput_drop_fraction = 0.4\n",
         "dflash-watch: [detectors] throughput_drop_fraction: set twice (also as throughput_drop_frac)"),
        ("[run]\ngrace = 3\n", "dflash-watch: [run] grace: unknown key (did you mean grace_s?)"),
        ("[run]\ngrace_s = -1\n", "dflash-watch: [run] grace_s = -1: must be >= 0"),
        ("[run]\ncommand = 5\n", "dflash-watch: [run] command = 5: must be a string"),
        ("[run]\nauto_relaunch = \"yes\"\n", 'dflash-watch: [run] auto_relaunch = "yes": must be true or false'),
        ("[gpu]\ninterval_s = 0\n", "dflash-watch: [gpu] interval_s = 0: must be > 0"),
        ("[gpu]\nindices = [0, \"1\"]\n", 'dflash-watch: [gpu] indices = [0, "1"]: must be a list of whole numbers'),
        ("log = \"train.log\"\n", "dflash-watch: log: unknown key (did you mean logs?)"),
        ("logs = [1, 2]\n", "dflash-watch: logs = [1, 2]: must be a path or a list of paths (strings)"),
        ("detectors = 3\n", "dflash-watch: detectors = 3: must be a table ([detectors])"),
        ("[keys]\nabrt = \"ctrl+a\"\n", "dflash-watch: [keys] abrt: not a key binding id (did you mean abort?)"),
        ("[keys]\nabort = \"cmd+a\"\n",
         "dflash-watch: [keys] abort = \"cmd+a\": 'cmd' is not a modifier (one of alt, ctrl, hyper, meta, shift, super)"),
        ("[keys]\nabort = \"ctrl+\"\n", ("dflash-watch: [keys] abort = \"ctrl+\": '' is not a key "
                                        "(a character, a name like escape, f5, pageup, question_mark)")),
        ("[keys]\nhelp = \"question mark\"\n", ("dflash-watch: [keys] help = \"question mark\": 'question mark' is "
                                               "not a key (a character, a name like escape, f5, pageup, question_mark)")),
        ("[keys]\nabort = 1\n", 'dflash-watch: [keys] abort = 1: must be a key string ("ctrl+a", "f5")'),
        ("[keys]\nabort = \"/\"\n", 'dflash-watch: [keys] abort = "/": slash is also the key of filter'),
        ("keys = \"a\"\n", 'dflash-watch: keys = "a": must be a table ([keys])'),
    ],
)
def test_a_wrong_value_is_one_line_naming_the_key_and_its_range(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "c.toml").write_text(toml)
    out = cli("replay", "--json", "--config", "c.toml", str(a_log(tmp_path)), cwd=tmp_path)
    assert one_line(out) == message


def test_job_commands_refuse_a_wrong_config_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("[run]\nmax_restarts = -2\n")
    out = cli("status", "--config", "c.toml", cwd=tmp_path)
    assert one_line(out) == "dflash-watch: [run] max_restarts = -2: must be a whole number >= 0"


def test_the_time_zone_reaches_the_detectors_messages(tmp_path: Path) -> None:
    """`tz` is the top-level key; the clock times in alert messages use it."""
    log = tmp_path / "train.log"
    lines = [f"2026-11-29 10:{i // 60:02d}:{i % 60:02d} step {i // 5}/1000 | 21.5 Ktok/s" for i in range(0, 300, 5)]
    log.write_text("\n".join(lines) + "\n2026-11-29 11:00:00 step 61/1000 | 21.5 Ktok/s\n")
    (tmp_path / "c.toml").write_text('tz = "Asia/Tokyo"\n')
    out = cli("replay", "--json", "--config", "c.toml", str(log), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # 10:04:55 in Tokyo is the last step before the silence.
    assert "10:04:55" in out.stdout, out.stdout


def test_keys_are_checked_and_normalised_as_textual_spells_them() -> None:
    from dflash_watch.config import parse_config

    keys = parse_config({"keys": {"abort": "ctrl+a", "help": "h, f1", "filter": "ctrl+/", "start": "a"}}).keys
    # `start = "a"` is fine although a is abort's default: abort moved away.
    assert keys == {"abort": "ctrl+a", "help": "h,f1", "filter": "ctrl+slash", "start": "a"}
    assert parse_config({}).keys == {}


# -- where the file is found ----------------------------------------------------


def _place(path: Path, tz: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'tz = "{tz}"\n')


def test_the_config_is_found_in_xdg_config_home_after_the_run_directory(tmp_path: Path, monkeypatch) -> None:
    home, xdg, run = tmp_path / "home", tmp_path / "xdg", tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.chdir(run)
    assert load_config(None).path is None  # nothing anywhere: the defaults
    _place(home / ".config/dflash-watch/config.toml", "Etc/GMT-1")  # where the tool looked before: still read
    assert load_config(None).tz == "Etc/GMT-1"
    _place(xdg / "dflash-watch/config.toml", "Etc/GMT-2")
    assert load_config(None).tz == "Etc/GMT-2"
    _place(xdg / "dflash-watch/dflash-watch.toml", "Etc/GMT-3")
    assert load_config(None).tz == "Etc/GMT-3"
    _place(run / "dflash-watch.toml", "Etc/GMT-4")  # the run's own directory wins
    assert load_config(None).tz == "Etc/GMT-4"


@pytest.mark.parametrize("value", ["", "relative/dir"])
def test_an_empty_or_relative_xdg_config_home_means_dot_config(tmp_path: Path, monkeypatch, value: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", value)
    monkeypatch.chdir(tmp_path)
    _place(tmp_path / "relative/dir/dflash-watch/dflash-watch.toml", "Etc/GMT-5")  # never read
    _place(tmp_path / ".config/dflash-watch/dflash-watch.toml", "Etc/GMT-6")
    assert load_config(None).tz == "Etc/GMT-6"


def test_a_command_reads_the_config_from_xdg_config_home(tmp_path: Path) -> None:
    """The real command finds a config in $XDG_CONFIG_HOME: its bad value is refused, naming the key."""
    xdg = tmp_path / "xdg"
    (xdg / "dflash-watch").mkdir(parents=True)
    (xdg / "dflash-watch/dflash-watch.toml").write_text("[gpu]\ninterval_s = 0\n")
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(xdg), "PYTHONPATH": path,
           "XDG_STATE_HOME": str(tmp_path / "state")}
    out = subprocess.run([sys.executable, "-m", "dflash_watch.cli", "replay", "--json", str(a_log(tmp_path))],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert one_line(out) == "dflash-watch: [gpu] interval_s = 0: must be > 0"


def test_init_says_where_commands_look_when_it_writes_elsewhere(tmp_path: Path) -> None:
    out = cli("init", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.splitlines() == [
        "wrote dflash-watch.toml; edit [run].command and logs, then run `dflash-watch watch`"]
    out = cli("init", "other.toml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    said = out.stdout.splitlines()[1]
    assert said.startswith("commands read it with --config other.toml; without --config they look in"), said
    assert said.endswith(f"dflash-watch.toml, {tmp_path}/.config/dflash-watch/dflash-watch.toml, "
                         f"{tmp_path}/.config/dflash-watch/config.toml"), said


def test_config_and_sinks_import_alone_without_a_circle() -> None:
    """Each of config, sinks.settings and checks imports first in a fresh interpreter,
    and sinks.settings never loads dflash_watch.config (no circle, no privates)."""
    code = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        "print('dflash_watch.config' in sys.modules)"
    )
    seen = {}
    for name in ("dflash_watch.config", "dflash_watch.sinks.settings", "dflash_watch.sinks.senders",
                 "dflash_watch.checks", "dflash_watch.keymap"):
        out = subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True, timeout=60,
                             cwd=ROOT, check=False)
        assert out.returncode == 0, out.stderr
        seen[name] = out.stdout.strip()
    assert seen == {"dflash_watch.config": "True", "dflash_watch.sinks.settings": "False",
                    "dflash_watch.sinks.senders": "False", "dflash_watch.checks": "False",
                    "dflash_watch.keymap": "False"}
