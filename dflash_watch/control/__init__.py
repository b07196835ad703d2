"""Control of the tmux-managed training job (start, status, abort, relaunch).

Nothing here acts on the job unless asked: importing or quitting
dflash-watch never touches a running training.
"""

from .adopt import Adoption, Foreground
from .autorelaunch import AutoRelaunchConfig, AutoRelauncher, AutoRelaunchPolicy, Decision
from .errors import SurvivorsAlive
from .job import (
    AlreadyRunning,
    ControlUnavailable,
    Job,
    JobError,
    JobSpec,
    JobState,
    RelaunchRefused,
    classify_exit,
)
from .lock import JobLock, LockTimeout
from .survivors import Survivors
from .tmux import InvalidName, Tmux, TmuxError, TmuxMissing, TmuxServerGone, validate_name

__all__ = [
    "Adoption",
    "AlreadyRunning",
    "AutoRelaunchConfig",
    "AutoRelaunchPolicy",
    "AutoRelauncher",
    "ControlUnavailable",
    "Decision",
    "Foreground",
    "InvalidName",
    "Job",
    "JobError",
    "JobLock",
    "JobSpec",
    "JobState",
    "LockTimeout",
    "RelaunchRefused",
    "Survivors",
    "SurvivorsAlive",
    "Tmux",
    "TmuxError",
    "TmuxMissing",
    "TmuxServerGone",
    "classify_exit",
    "validate_name",
]
