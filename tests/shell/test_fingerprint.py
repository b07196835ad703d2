"""The environment fingerprint from a real venv and a real training process.

The venv is made here (``python -m venv``) and two tiny wheels built here
are installed into it by pip (offline); a training script
with a config on its command line runs as a child of the test with chosen
environment variables, secrets among them, and is read through its /proc.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dflash_watch.baseline.fingerprint import FingerprintError, fingerprint_of_env, fingerprint_of_pid, training_pid
from dflash_watch.baseline.fingerprint.cache import cache_size

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
TORCH_VERSION_PY = """from typing import Optional
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("executed")  # never run by the fingerprint
hip = __import__("pathlib").Path({marker!r}).write_text("evaluated")  # a value that is code: skipped
__version__ = '2.5.1+cu124'
debug = False
cuda: Optional[str] = '12.4'
git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'
"""


def _wheel(root: Path, name: str, version: str) -> Path:
    """A tiny pure-Python wheel (a zip with its dist-info and RECORD), built
    here so that pip installs a real wheel offline, without setuptools."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": "X = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = root / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fp")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = venv / "lib" / PY / "site-packages"
    wheels = [_wheel(root, "Tiny_Data", "1.2.3"), _wheel(root, "tiny-other", "0.1")]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site),
                    *map(str, wheels)],
                   check=True, timeout=120, capture_output=True)
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text(TORCH_VERSION_PY.format(marker=str(site / "torch" / "EVALUATED")))
    return venv


def test_a_venv_dir_or_its_python_gives_its_packages_and_torch_build(venv: Path) -> None:
    fp = fingerprint_of_env(venv, cache_dir=str(venv / "no-cache"))
    assert fp.packages == {"tiny-data": "1.2.3", "tiny-other": "0.1"}  # PEP 503 names, from dist-info
    assert fp.python == ".".join(map(str, sys.version_info[:3]))  # pyvenv.cfg's version
    assert (fp.torch, fp.cuda, fp.torch_git) == ("2.5.1+cu124", "12.4", "cf30153c4c131c8164ee7798e5022d810682e2cb")
    torch_dir = venv / "lib" / PY / "site-packages" / "torch"
    assert not (torch_dir / "IMPORTED").exists() and not (torch_dir / "EVALUATED").exists()  # text only
    data = fp.to_dict()
    assert data["compile_cache"] == {"path": str(venv / "no-cache"), "bytes": 0, "entries": 0}  # cold
    assert "env" not in data and "launch_args" not in data  # no process: unknown, not empty
    assert fingerprint_of_env(venv / "bin" / "python").packages == fp.packages
    with pytest.raises(FingerprintError, match="not a directory"):
        fingerprint_of_env(venv / "missing")


def test_a_running_training_process_is_read_through_its_proc(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
    (tmp_path / "cfg.yaml").write_text("lr: 0.1\n")
    (tmp_path / "data.json").write_text("{}\n")
    cache = tmp_path / "inductor"
    (cache / "fx").mkdir(parents=True)
    (cache / "fx" / "a.py").write_bytes(b"x" * 1000)
    (cache / "b.so").write_bytes(b"y" * 500)
    chosen = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "INFO",
              "TORCH_LOGS": "recompiles", "OMP_NUM_THREADS": "4", "TORCHINDUCTOR_CACHE_DIR": str(cache),
              "CUDA_VISIBLE_DEVICES": "0,1"}
    secrets = {"HF_TOKEN": "hf_secret_1", "SLACK_WEBHOOK_URL": "https://hooks/secret_2",
               "TORCH_HUB_TOKEN": "secret_3", "NCCL_AUTH_KEY": "secret_4"}
    child = subprocess.Popen(
        [str(venv / "bin" / "python"), "train.py", "--config", "cfg.yaml", "--data=data.json", "--lr", "0.1"],
        cwd=tmp_path, env={"PATH": os.environ["PATH"], **chosen, **secrets},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        fp = fingerprint_of_pid(child.pid)
        shell = subprocess.Popen(["sleep", "30"])
        try:
            assert training_pid([shell.pid, child.pid]) == child.pid
            assert training_pid([shell.pid]) is None
        finally:
            shell.kill()
            shell.wait()
    finally:
        child.stdin.close()
        child.wait(timeout=10)
    assert fp.env == chosen
    text = json.dumps(fp.to_dict())
    assert "secret" not in text
    assert fp.launch_args == [str(venv / "bin" / "python"), "train.py", "--config", "cfg.yaml",
                              "--data=data.json", "--lr", "0.1"]
    sha = {n: hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in ("train.py", "cfg.yaml", "data.json")}
    assert fp.files == sha
    assert fp.packages == {"tiny-data": "1.2.3", "tiny-other": "0.1"} and fp.torch == "2.5.1+cu124"
    assert fp.compile_cache.to_dict() == {"path": str(cache), "bytes": 1500, "entries": 3}
    with pytest.raises(FingerprintError, match="gone"):
        fingerprint_of_pid(child.pid)


def test_the_cache_walk_stops_at_its_cap(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"f{i}").write_bytes(b"z" * 10)
    capped = cache_size(str(tmp_path), max_entries=5)
    assert (capped.entries, capped.complete) == (5, False) and capped.to_dict()["complete"] is False
    whole = cache_size(str(tmp_path))
    assert (whole.bytes, whole.entries, whole.complete) == (200, 20, True)
