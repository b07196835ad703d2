"""The live Monitor learns the running job's environment from its process.

A real tmux job on a private socket runs a Python trainer with a config
file on its command line and training variables in its environment; the
reader fills ``monitor.fingerprint`` from /proc of that process only.
"""

from __future__ import annotations

import shlex

from tmux_job_helpers import PY, TRAINERS, spec, wait_for

from dflash_watch.control.job import Job
from dflash_watch.monitor import Monitor
from dflash_watch.sources.job_env import JobEnvironment


def test_the_running_jobs_environment_reaches_the_monitor(tmux, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("lr: 2e-4\n")
    trainer = f"{PY} {shlex.quote(str(TRAINERS / 'long_trainer.py'))} --pid-file {shlex.quote(str(tmp_path / 'pids'))}"
    cmd = f"env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True SECRET_TOKEN=hunter2 {trainer} --config {config}"
    job = Job(spec(tmux, tmp_path, cmd))
    job.start()
    monitor = Monitor()
    reader = JobEnvironment(monitor, job, interval_s=60, retry_s=0.2).start()
    try:
        fp = wait_for(lambda: monitor.fingerprint, timeout=20)
    finally:
        reader.close()
        job.abort(grace_s=1.0)
    assert fp["env"].get("PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True"
    assert "SECRET_TOKEN" not in fp["env"] and "hunter2" not in repr(fp)
    assert any(str(config) in path or path.endswith("run.yaml") for path in fp["files"]), fp["files"]
    assert fp["packages"] and fp["python"]
