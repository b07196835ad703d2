"""The fingerprint as a value: what the baseline file's ``fingerprint`` key holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class FingerprintError(ValueError):
    """An environment or process that cannot be fingerprinted; one line for stderr."""


@dataclass(frozen=True, slots=True)
class CompileCache:
    """The inductor/triton cache directory: a cold cache (a few KB where the
    good run had hundreds of MB) means every graph is compiled again."""

    path: str
    bytes: int
    entries: int
    # False when the walk stopped at its file or time cap: the figures are
    # then lower bounds.
    complete: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "bytes": self.bytes, "entries": self.entries}
        if not self.complete:
            out["complete"] = False
        return out


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """One environment. A section that could not be read is None (unknown),
    not empty: a venv named with ``--env`` has packages but no process, so
    its ``env``, ``files`` and ``launch_args`` are unknown, and the diagnosis
    compares only what both sides know."""

    python: str | None = None
    torch: str | None = None
    torch_git: str | None = None
    cuda: str | None = None
    packages: dict[str, str] | None = None
    env: dict[str, str] | None = None
    files: dict[str, str] | None = None
    launch_args: list[str] | None = None
    compile_cache: CompileCache | None = None
    site_packages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (CONTRACTS section 6, key ``fingerprint``); unknown
        sections are left out."""
        out: dict[str, Any] = {}
        for name in ("python", "torch", "torch_git"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.torch is not None:
            out["cuda"] = self.cuda  # null: a CPU build (known), not unknown
        if self.packages is not None:
            out["packages"] = dict(sorted(self.packages.items()))
        if self.env is not None:
            out["env"] = dict(sorted(self.env.items()))
        if self.files is not None:
            out["files"] = dict(self.files)
        if self.launch_args is not None:
            out["launch_args"] = list(self.launch_args)
        if self.compile_cache is not None:
            out["compile_cache"] = self.compile_cache.to_dict()
        if self.site_packages:
            out["site_packages"] = list(self.site_packages)
        return out
