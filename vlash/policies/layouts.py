"""Which kind of policy directory a path is, from its files alone (no torch: command-line checks use it before
anything heavy is imported)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vlash.errors import CheckpointError


def detect_layout(directory: str | Path) -> str:
    """ "vlash", "lerobot" or "openpi", from the directory's files; CheckpointError saying what was looked for."""
    path = Path(directory)
    if not path.is_dir():
        raise CheckpointError(f"{path} is not a directory")
    if (path / "config.yaml").is_file():
        return "vlash"
    if (path / "policy_preprocessor.json").is_file() or (path / "policy_postprocessor.json").is_file():
        return "lerobot"
    if (path / "model.safetensors").is_file() and (path / "assets").is_dir():
        return "openpi"
    if (path / "config.json").is_file() and (path / "model.safetensors").is_file():
        return "lerobot"  # its loader names the processor files it misses
    raise CheckpointError(
        f"{path} is not a policy directory: expected config.yaml (vlash), config.json + policy_preprocessor.json "
        "(LeRobot) or model.safetensors + assets/<id>/norm_stats.json (openpi PyTorch); for openpi JAX params "
        "run `vlash convert --from openpi-jax`"
    )


def read_json_object(path: Path) -> dict[str, Any]:
    """A checkpoint's JSON file that holds one object (config.json, pipeline JSONs); CheckpointError naming it."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not a readable JSON file: {exc}") from exc
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc
