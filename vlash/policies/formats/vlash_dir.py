"""vlash's own policy directory (format "vlash.policy/1"), written atomically:

config.yaml          model config + processor settings + free-form metadata (how it was made)
model.safetensors    weights in vlash's key layout (a quantized policy: its layers and quant.json)
stats.safetensors    normalization stats (vlash.policies.formats.stats_io)
tokenizer.json | tokenizer.model
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import yaml

from vlash.atomic import staged_directory
from vlash.errors import CheckpointError
from vlash.policies.formats.base import LoadedPolicy, input_settings
from vlash.policies.formats.stats_io import load_stats, save_stats
from vlash.policies.pi05.config import config_from_dict
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.weights import load_model, save_weights
from vlash.policies.processing.normalization import Normalizer
from vlash.policies.processing.processor import Pi05Processor
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer
from vlash.policies.processing.transforms import StateActionTransform, load_transform
from vlash.policies.quantized.loading import load_quantized_model

FORMAT = "vlash.policy/1"
TOKENIZER_FILES = {".json": "tokenizer.json", ".model": "tokenizer.model"}  # suffix -> the name in the directory


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
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Write a complete vlash policy directory (plus `extra_files`: name -> text, e.g. a training log);
    an existing one is replaced only once the new one is whole. `relative_mask`: action dims the model
    predicts relative to the state; `transform`: the model's space when it is not the joints (see `Pi05Processor`);
    `settings`: how images and the prompt are presented (`input_settings`; defaults: openpi's)."""
    tokenizer_file = Path(tokenizer_file)
    if tokenizer_file.suffix not in TOKENIZER_FILES or not tokenizer_file.is_file():
        raise CheckpointError(
            f"tokenizer_file must be an existing tokenizers .json or sentencepiece .model file, got {tokenizer_file}"
        )
    tokenizer_config = tokenizer_file.parent / "tokenizer_config.json"  # may name the BOS token (tokenizer.json)
    processor = {
        "action_dims": action_dims,
        "state_dims": state_dims,
        "relative_mask": None if relative_mask is None else [bool(m) for m in relative_mask],
        "transform": None if transform is None else transform.to_dict(),
        **dict(settings or {}),
    }
    doc = {"format": FORMAT, "policy": model.config.to_dict(), "processor": processor, "metadata": metadata or {}}
    with staged_directory(directory) as staging:
        (staging / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        save_weights(model, staging / "model.safetensors")
        save_stats(staging / "stats.safetensors", normalizer)
        shutil.copyfile(tokenizer_file, staging / TOKENIZER_FILES[tokenizer_file.suffix])
        if tokenizer_file.suffix == ".json" and tokenizer_config.is_file():
            shutil.copyfile(tokenizer_config, staging / tokenizer_config.name)
        for name, text in (extra_files or {}).items():
            (staging / name).write_text(text)
    return Path(directory)


def save_loaded_policy(directory: str | Path, policy: LoadedPolicy, metadata: dict[str, Any] | None = None) -> Path:
    """Write any loaded policy (LeRobot, openpi, converted) as a vlash policy directory that loads to the same
    model and processor."""
    proc = policy.processor
    return save_policy(
        directory,
        policy.model,
        proc.normalizer,
        proc.prompt_encoder.tokenizer.source,
        action_dims=proc.action_dims,
        state_dims=proc.prompt_encoder.state_dims,
        metadata=metadata if metadata is not None else policy.metadata,
        relative_mask=proc.relative_mask,
        transform=proc.transform,
        settings=input_settings(proc),
    )


def load_vlash_policy(path: Path, dtype: str | torch.dtype, device: str | torch.device) -> LoadedPolicy:
    source = path / "config.yaml"
    try:
        doc = yaml.safe_load(source.read_text())
    except yaml.YAMLError as exc:
        raise CheckpointError(f"{source} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{source}: format is not {FORMAT!r}")
    if not isinstance(doc.get("policy"), dict):
        raise CheckpointError(f"{source} has no 'policy' section")
    config = config_from_dict(doc["policy"])
    if (path / "quant.json").is_file():  # weight-only int8/int4 layers (vlash.policies.quantized)
        model = load_quantized_model(config, path, dtype=dtype, device=device)
    else:
        model = load_model(config, path / "model.safetensors", dtype=dtype, device=device)
    proc = doc.get("processor") or {}
    encoder = Pi05PromptEncoder(
        PromptTokenizer.from_dir(path),
        max_len=config.max_token_len,
        state_dims=proc.get("state_dims"),
        state_in_prompt=bool(proc.get("state_in_prompt", True)),
        pad_state_to=proc.get("pad_state_to"),
    )
    mask, space = proc.get("relative_mask"), proc.get("transform")
    processor = Pi05Processor(
        config,
        load_stats(path / "stats.safetensors"),
        encoder,
        action_dims=proc.get("action_dims", config.action_dim),
        antialias=bool(proc.get("antialias", True)),
        image_pad_value=float(proc.get("image_pad_value", -1.0)),
        round_resized_images=bool(proc.get("round_resized_images", True)),
        relative_mask=None if mask is None else tuple(mask),
        transform=None if space is None else load_transform(space, str(source)),
    )
    return LoadedPolicy(model, processor, doc.get("metadata", {}))
