"""Which kind of vlash output a directory holds, read from the marker file its writer puts there (no torch:
command-line checks use it before anything heavy is imported).

    engine artifact      manifest.json of format vlash.engine-artifact/1 (vlash export; vlash quantize's ONNX and
                         TensorRT schemes)
    quantized policy     a vlash policy directory with quant.json (vlash quantize's torch schemes)
    training run         a vlash policy directory with train_log.json (vlash train)
    policy directory     config.yaml of format vlash.policy/1 and neither of those (vlash convert)

The commands replace only a directory of the kind they write (`--overwrite`, vlash.cli.preflight.check_output_dir),
and only while it holds nothing but the files its vlash_files.json lists (vlash.atomic.check_replaceable).
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import yaml

# The writers' names (a test checks they agree): they live in modules that import torch.
POLICY_CONFIG = "config.yaml"
POLICY_FORMAT = "vlash.policy/1"  # = vlash.policies.policy_dir.FORMAT
ARTIFACT_MANIFEST = "manifest.json"  # = vlash.engines.artifact.MANIFEST
ARTIFACT_FORMAT = "vlash.engine-artifact/1"  # = vlash.engines.artifact.FORMAT
QUANT_MANIFEST = "quant.json"  # = vlash.policies.quantized.manifest.MANIFEST_NAME
TRAIN_LOG = "train_log.json"  # = vlash.train.output.TRAIN_LOG


class OutputKind(Enum):
    """What a command writes; the value is how messages name it."""

    POLICY = "a vlash policy directory"
    TRAINING_RUN = "a training run (a policy directory with train_log.json)"
    QUANTIZED_POLICY = "a quantized policy (a policy directory with quant.json)"
    ENGINE_ARTIFACT = "an engine artifact (manifest.json)"


def output_kind(directory: str | Path) -> OutputKind | None:
    """The kind of vlash output `directory` holds, or None when it holds none (missing, or anything else)."""
    path = Path(directory)
    if _format(path / ARTIFACT_MANIFEST, json.loads) == ARTIFACT_FORMAT:
        return OutputKind.ENGINE_ARTIFACT
    if _format(path / POLICY_CONFIG, yaml.safe_load) != POLICY_FORMAT:
        return None
    if (path / QUANT_MANIFEST).is_file():
        return OutputKind.QUANTIZED_POLICY
    if (path / TRAIN_LOG).is_file():
        return OutputKind.TRAINING_RUN
    return OutputKind.POLICY


def _format(marker: Path, parse) -> str | None:
    """The "format" field of a JSON / YAML marker file; None when it is missing or unreadable."""
    try:
        doc = parse(marker.read_text())
    except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return doc.get("format") if isinstance(doc, dict) else None
