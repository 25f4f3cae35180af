"""Policy directories: vlash's own (written atomically) and LeRobot's (read only).

vlash layout (format "vlash.policy/1"):
    config.yaml          model config + processor settings + free-form metadata (how it was made)
    model.safetensors    weights in vlash's key layout
    stats.safetensors    normalization stats (vlash.policies.stats_io)
    tokenizer.json | tokenizer.model
LeRobot layout: config.json (type "pi05") + model.safetensors + policy_{pre,post}processor files; the
tokenizer (PaliGemma's) is not part of a LeRobot checkpoint: put tokenizer.model/json in the directory
or pass `tokenizer_dir`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from vlash.atomic import staged_directory
from vlash.errors import CheckpointError
from vlash.policies.checkpoint import load_model, save_weights
from vlash.policies.normalization import Normalizer
from vlash.policies.pi05.config import Pi05Config, config_from_dict, load_preset
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.processor import Pi05Processor
from vlash.policies.stats_io import load_lerobot_normalizer, load_stats, save_stats
from vlash.policies.tokenizer import Pi05PromptEncoder, PromptTokenizer
from vlash.policies.transforms import StateActionTransform, load_transform

FORMAT = "vlash.policy/1"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")


@dataclass
class LoadedPolicy:
    model: Pi05Model
    processor: Pi05Processor
    metadata: dict[str, Any]  # provenance from config.yaml (vlash) or config.json (LeRobot)

    @property
    def config(self) -> Pi05Config:
        return self.model.config


def save_policy(
    directory: str | Path,
    model: Pi05Model,
    normalizer: Normalizer,
    tokenizer_file: str | Path,
    action_dims: int,
    state_dims: int | None = None,
    metadata: dict[str, Any] | None = None,
    extra_files: Mapping[str, str] | None = None,
    relative_mask: tuple[bool, ...] | None = None,
    transform: StateActionTransform | None = None,
) -> Path:
    """Write a complete vlash policy directory (plus `extra_files`: name -> text, e.g. a training log);
    an existing one is replaced only once the new one is whole. `relative_mask`: action dims the model
    predicts relative to the state; `transform`: the model's space when it is not the joints (see `Pi05Processor`)."""
    tokenizer_file = Path(tokenizer_file)
    if tokenizer_file.name not in TOKENIZER_FILES or not tokenizer_file.is_file():
        raise CheckpointError(
            f"tokenizer_file must be an existing {' or '.join(TOKENIZER_FILES)}, got {tokenizer_file}"
        )
    doc = {
        "format": FORMAT,
        "policy": model.config.to_dict(),
        "processor": {
            "action_dims": action_dims,
            "state_dims": state_dims,
            "relative_mask": None if relative_mask is None else [bool(m) for m in relative_mask],
            "transform": None if transform is None else transform.to_dict(),
        },
        "metadata": metadata or {},
    }
    with staged_directory(directory) as staging:
        (staging / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        save_weights(model, staging / "model.safetensors")
        save_stats(staging / "stats.safetensors", normalizer)
        shutil.copyfile(tokenizer_file, staging / tokenizer_file.name)
        for name, text in (extra_files or {}).items():
            (staging / name).write_text(text)
    return Path(directory)


def load_policy(
    directory: str | Path,
    dtype: str | torch.dtype = "fp32",
    device: str | torch.device = "cpu",
    tokenizer_dir: str | Path | None = None,
    model_config: Pi05Config | None = None,
) -> LoadedPolicy:
    """Load a vlash or LeRobot policy directory (detected from its files).

    For LeRobot directories `tokenizer_dir` points at PaliGemma's tokenizer when the checkpoint directory
    has none, and `model_config` replaces the full-size shapes implied by config.json (custom-size models).
    """
    path = Path(directory)
    if (path / "config.yaml").is_file():
        return _load_vlash(path, dtype, device)
    if (path / "config.json").is_file():
        tokenizer_path = Path(tokenizer_dir) if tokenizer_dir else path
        return _load_lerobot(path, dtype, device, tokenizer_path, model_config)
    raise CheckpointError(f"{path} is not a policy directory (no config.yaml or config.json)")


def _load_vlash(path: Path, dtype: str | torch.dtype, device: str | torch.device) -> LoadedPolicy:
    doc = yaml.safe_load((path / "config.yaml").read_text())
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{path / 'config.yaml'}: format is not {FORMAT!r}")
    if not isinstance(doc.get("policy"), dict):
        raise CheckpointError(f"{path / 'config.yaml'} has no 'policy' section")
    config = config_from_dict(doc["policy"])
    if (
        path / "quant.json"
    ).is_file():  # a quantized artifact (vlash/policies/quantized/manifest.py): weight-only int8/int4 layers
        from vlash.policies.quantized.loading import load_quantized_model

        model = load_quantized_model(config, path, dtype=dtype, device=device)
    else:
        model = load_model(config, path / "model.safetensors", dtype=dtype, device=device)
    proc = doc.get("processor", {})
    encoder = Pi05PromptEncoder(
        PromptTokenizer.from_dir(path), max_len=config.max_token_len, state_dims=proc.get("state_dims")
    )
    mask, space = proc.get("relative_mask"), proc.get("transform")
    processor = Pi05Processor(
        config,
        load_stats(path / "stats.safetensors"),
        encoder,
        action_dims=proc.get("action_dims", config.action_dim),
        relative_mask=None if mask is None else tuple(mask),
        transform=None if space is None else load_transform(space, str(path / "config.yaml")),
    )
    return LoadedPolicy(model, processor, doc.get("metadata", {}))


def config_from_lerobot(doc: dict[str, Any]) -> tuple[Pi05Config, int, int]:
    """(model config, state dims, action dims) from a LeRobot pi05 config.json."""
    if doc.get("type") != "pi05":
        raise CheckpointError(f"LeRobot config type is {doc.get('type')!r}, vlash loads 'pi05'")
    variants = (doc.get("paligemma_variant", "gemma_2b"), doc.get("action_expert_variant", "gemma_300m"))
    if variants != ("gemma_2b", "gemma_300m"):
        raise CheckpointError(f"unsupported LeRobot pi05 variants {variants}; vlash knows gemma_2b + gemma_300m")
    inputs, outputs = doc.get("input_features", {}), doc.get("output_features", {})
    cameras = [k.removeprefix("observation.images.") for k, v in inputs.items() if v.get("type") == "VISUAL"]
    cameras += [f"empty_camera_{i}" for i in range(doc.get("empty_cameras", 0))]
    try:
        state_dims = int(inputs["observation.state"]["shape"][0])
        action_dims = int(outputs["action"]["shape"][0])
    except (KeyError, IndexError, TypeError) as exc:
        raise CheckpointError(f"LeRobot config lacks state/action feature shapes ({exc})") from exc
    config = load_preset("pi05").with_overrides(
        name="pi05-lerobot",
        camera_names=cameras,
        action_horizon=doc.get("chunk_size", 50),
        action_dim=doc.get("max_action_dim", 32),
        max_token_len=doc.get("tokenizer_max_length", 200),
        num_steps=doc.get("num_inference_steps", 10),
    )
    return config, state_dims, action_dims


def _load_lerobot(
    path: Path,
    dtype: str | torch.dtype,
    device: str | torch.device,
    tokenizer_dir: Path,
    model_config: Pi05Config | None,
) -> LoadedPolicy:
    try:
        doc = json.loads((path / "config.json").read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path / 'config.json'} is not valid JSON: {exc}") from exc
    config, state_dims, action_dims = config_from_lerobot(doc)
    config = model_config or config
    model = load_model(config, path / "model.safetensors", dtype=dtype, device=device)
    encoder = Pi05PromptEncoder(
        PromptTokenizer.from_dir(tokenizer_dir), max_len=config.max_token_len, state_dims=state_dims
    )
    processor = Pi05Processor(config, load_lerobot_normalizer(path), encoder, action_dims=action_dims, antialias=False)
    return LoadedPolicy(model, processor, {"source": "lerobot", "lerobot_config": doc})
