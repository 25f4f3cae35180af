"""Which kind of policy directory a path is, and whether it has a tokenizer, from its files alone (no torch:
command-line checks use it before anything heavy is imported, so a wrong path or a missing --tokenizer is reported
before a checkpoint's weights load)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vlash.errors import CheckpointError
from vlash.policies.processing.tokenizer_files import SENTENCEPIECE_MODEL, TOKENIZER_JSON

LEROBOT_PREPROCESSOR = "policy_preprocessor.json"  # = vlash.policies.formats.lerobot_pipeline.PREPROCESSOR_JSON
# what a checkpoint of each layout says when it has no tokenizer of its own and --tokenizer is not given
NO_TOKENIZER = {
    "lerobot": "{path} has no tokenizer (LeRobot saves one only from 0.6.2): pass --tokenizer PATH to PaliGemma's "
    "tokenizer.json or tokenizer.model (google/paligemma-3b-pt-224); vlash never downloads one",
    "openpi": "{path} has no tokenizer (openpi checkpoints do not include one): pass --tokenizer PATH to "
    "paligemma_tokenizer.model (gs://big_vision/paligemma_tokenizer.model); vlash never downloads one",
}


def detect_layout(directory: str | Path) -> str:
    """ "vlash", "lerobot" or "openpi", from the directory's files; CheckpointError saying what was looked for."""
    path = Path(directory)
    if not path.is_dir():
        raise CheckpointError(f"{path} is not a directory")
    if (path / "config.yaml").is_file():
        return "vlash"
    if (path / LEROBOT_PREPROCESSOR).is_file() or (path / "policy_postprocessor.json").is_file():
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


def checkpoint_dirs(path: str | Path) -> tuple[Path, Path]:
    """(checkpoint root holding assets/, params directory) of an openpi JAX checkpoint, given its root or its params/
    directory; absolute, as orbax needs."""
    path = Path(path).resolve()
    if (path / "params").is_dir():
        return path, path / "params"
    if path.is_dir() and path.name == "params":
        return path.parent, path
    raise CheckpointError(f"{path} is neither an openpi checkpoint (with params/) nor its params/ directory")


def has_tokenizer(path: Path) -> bool:
    """A tokenizer file, or a folder holding one: what `PromptTokenizer.from_dir` loads."""
    return path.is_file() or any((path / name).is_file() for name in (TOKENIZER_JSON, SENTENCEPIECE_MODEL))


def tokenizer_artifact(directory: Path, source: Path, step: dict[str, Any] | None) -> tuple[Path | None, int | None]:
    """(the tokenizer LeRobot >= 0.6.2 saved with the checkpoint, or None; the prompt length) of the preprocessor's
    tokenizer step `step` (read from `source`)."""
    if step is None:
        return None, None
    conf = step.get("config") or {}
    max_length = conf.get("max_length")
    artifact = (step.get("artifacts") or {}).get("tokenizer_name")
    if artifact is None:
        return None, max_length
    relative = Path(str(artifact))
    if relative.is_absolute() or ".." in relative.parts:
        raise CheckpointError(f"{source}: tokenizer artifact {artifact!r} must be a path inside the checkpoint")
    return directory / relative, max_length


def missing_tokenizer(directory: Path, layout: str) -> str | None:
    """Why a `layout` checkpoint at `directory` cannot load without --tokenizer (its loader's message), or None when
    it has a tokenizer of its own. The files are read leniently: a malformed one is left to its loader's errors."""
    if layout not in NO_TOKENIZER:
        return None  # a vlash directory holds its tokenizer
    own = directory
    if layout == "lerobot":
        own = _saved_lerobot_tokenizer(directory) or directory  # a saved one must load (lerobot_dir)
    return None if has_tokenizer(own) else NO_TOKENIZER[layout].format(path=directory)


def _saved_lerobot_tokenizer(directory: Path) -> Path | None:
    source = directory / LEROBOT_PREPROCESSOR
    try:
        steps = read_json_object(source).get("steps")
    except CheckpointError:
        return None
    if not isinstance(steps, list):
        return None
    step = next((s for s in steps if isinstance(s, dict) and s.get("registry_name") == "tokenizer_processor"), None)
    return tokenizer_artifact(directory, source, step)[0]
