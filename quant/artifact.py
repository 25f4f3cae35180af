"""Write quantized artifacts: a torch weight-only policy directory, with its manifest (`quant.json`)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

import vlash
from vlash.atomic import atomic_save, staged_directory
from vlash.errors import CheckpointError
from vlash.policies.formats.loading import load_policy
from vlash.policies.quantized.manifest import MANIFEST_NAME, QuantManifest
from vlash.quant.torch_quant import DEFAULT_GROUP_SIZE, plan_layers, quantize_model

POLICY_FILES = ("config.yaml", "stats.safetensors", "tokenizer.json", "tokenizer.model")


def copy_policy_files(src: Path, dst: Path, names: tuple[str, ...] = POLICY_FILES) -> None:
    """Copy the named files of policy directory `src` that exist into `dst`."""
    for name in names:
        if (src / name).is_file():
            shutil.copyfile(src / name, dst / name)


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def tool_versions() -> dict[str, str]:
    """Versions of vlash, torch and the installed ONNX tools (an int8 graph's numbers depend on onnxruntime)."""
    versions = {"vlash": vlash.__version__, "torch": torch.__version__}
    for name in ("onnx", "onnxruntime", "onnxruntime-gpu"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def base_info(policy_dir: str | Path) -> dict[str, Any]:
    """{"policy", "model_sha256", "source"} of an fp32 vlash policy directory."""
    path = Path(policy_dir)
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"{path}: no model.safetensors to quantize")
    if (path / MANIFEST_NAME).is_file():
        raise CheckpointError(f"{path} is already quantized ({MANIFEST_NAME}); quantize the fp32 policy instead")
    loaded_name = load_policy(path).config.name
    return {"policy": loaded_name, "model_sha256": file_sha256(weights), "source": str(path.resolve())}


def write_torch_artifact(
    policy_dir: str | Path, out: str | Path, scheme: str, group_size: int = DEFAULT_GROUP_SIZE
) -> QuantManifest:
    """Quantize a vlash policy directory's weights (torch-int8 / torch-int4) into a new policy directory."""
    src = Path(policy_dir)
    base = base_info(src)
    model = load_policy(src).model
    layers, kept = plan_layers(model, scheme, group_size)
    quantize_model(model, layers)
    manifest = QuantManifest(
        scheme=scheme,
        engine="torch",
        base=base,
        layers=layers,
        kept=kept,
        files={"model": "model.safetensors"},
        created_by=tool_versions(),
    )
    with staged_directory(out) as staging:
        copy_policy_files(src, staging)
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        metadata = {"format": "pt", "quant": scheme}
        atomic_save(staging / "model.safetensors", lambda tmp: save_file(state, tmp, metadata=metadata))
        manifest.write(staging)
    return manifest
