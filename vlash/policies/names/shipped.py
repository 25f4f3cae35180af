"""Policies shipped with the repository: `checkpoints/<name>/` next to the `vlash` package (vlash policy
directories, e.g. the simulation policies trained by `vlash train`)."""

from __future__ import annotations

from pathlib import Path

import vlash
from vlash.errors import CheckpointError


def shipped_root() -> Path:
    """`<repo>/checkpoints`: the repository root is the parent of the `vlash` package directory."""
    return Path(vlash.__file__).resolve().parent.parent / "checkpoints"


def available_shipped() -> list[str]:
    """Names of the shipped policies (directories holding a config.yaml), sorted."""
    root = shipped_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "config.yaml").is_file())


def shipped_policy_dir(name: str) -> Path:
    """The directory of the shipped policy `name`; CheckpointError listing the available names if absent."""
    path = shipped_root() / name
    if "/" in name or "\\" in name or not (path / "config.yaml").is_file():
        names = ", ".join(available_shipped()) or "none"
        raise CheckpointError(f"no shipped policy {name!r} under {shipped_root()}; available: {names}")
    return path
