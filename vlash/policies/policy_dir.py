"""Policy directories: vlash's own (written atomically), and loading any supported checkpoint directory.

vlash layout (format "vlash.policy/1"):
    config.yaml          model config + processor settings + free-form metadata (how it was made)
    model.safetensors    weights in vlash's key layout
    stats.safetensors    normalization stats (vlash.policies.stats_io)
    tokenizer.json | tokenizer.model

`load_policy` also reads a LeRobot pi0.5 directory (0.4.x to 0.6.x, vlash.policies.lerobot_dir) and an openpi
PyTorch checkpoint (vlash.policies.openpi_dir), detected from their files; `CheckpointOptions` carries what
those layouts do not store (the tokenizer, a non-standard model size, openpi's asset and prompt settings).
"""

from __future__ import annotations

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
from vlash.policies.layouts import detect_layout
from vlash.policies.normalization import Normalizer
from vlash.policies.pi05.config import Pi05Config, config_from_dict
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.processor import Pi05Processor
from vlash.policies.stats_io import load_stats, save_stats
from vlash.policies.tokenizer import Pi05PromptEncoder, PromptTokenizer
from vlash.policies.transforms import StateActionTransform, load_transform

FORMAT = "vlash.policy/1"
TOKENIZER_FILES = {".json": "tokenizer.json", ".model": "tokenizer.model"}  # suffix -> the name in the directory
MODEL_SIZES = ("name", "vision", "vlm", "expert", "vocab_size")  # what --model-config gives a checkpoint


@dataclass
class LoadedPolicy:
    model: Pi05Model
    processor: Pi05Processor
    metadata: dict[str, Any]  # provenance from config.yaml (vlash), config.json (LeRobot) or the openpi assets

    @property
    def config(self) -> Pi05Config:
        return self.model.config


@dataclass(frozen=True)
class CheckpointOptions:
    """What a LeRobot or openpi checkpoint directory does not store; vlash directories need none of it."""

    tokenizer: Path | None = None  # tokenizer.json / tokenizer.model file or its directory (PaliGemma's)
    model_config: Pi05Config | None = None  # the model's sizes (vision, vlm, expert, vocab) when not pi0.5's full size
    asset_id: str | None = None  # openpi: which assets/<id>/norm_stats.json (needed when there are several)
    state_in_prompt: bool | None = None  # openpi: False for configs with discrete_state_input=False (pi05_libero)
    relative_mask: tuple[bool, ...] | None = None  # openpi: DeltaActions dims (e.g. pi05_aloha's joints)

    def sized(self, config: Pi05Config) -> Pi05Config:
        """`config` (from the checkpoint: cameras, chunk length, prompt length) with `model_config`'s sizes."""
        if self.model_config is None:
            return config
        sizes = {k: v for k, v in self.model_config.to_dict().items() if k in MODEL_SIZES}
        return config.with_overrides(**sizes)

    def unused_by(self, layout: str) -> list[str]:
        """The options set here that `layout` does not take."""
        allowed = {"vlash": (), "lerobot": ("tokenizer", "model_config"), "openpi": tuple(self.__dataclass_fields__)}
        names = ("tokenizer", "model_config", "asset_id", "state_in_prompt", "relative_mask")
        return [n for n in names if getattr(self, n) is not None and n not in allowed[layout]]


def arithmetic(processor: Pi05Processor) -> dict[str, str]:
    """The arithmetic a policy's numbers depend on, which follows the implementation that trained it (recorded in
    its metadata): the time embedding's precision (openpi fp32, LeRobot fp64) and resized images (openpi rounds them
    to uint8, LeRobot keeps floats)."""
    return {
        "time_embedding": processor.config.time_embedding,
        "resized_images": "uint8" if processor.round_resized_images else "float",
    }


def input_settings(processor: Pi05Processor) -> dict[str, Any]:
    """How `processor` presents images and the prompt (what differs between checkpoint families): the part of
    config.yaml's `processor` section that `save_policy`'s own arguments do not cover."""
    encoder = processor.prompt_encoder
    return {
        "antialias": processor.antialias,
        "image_pad_value": processor.image_pad_value,
        "round_resized_images": processor.round_resized_images,
        "state_in_prompt": encoder.state_in_prompt,
        "pad_state_to": encoder.pad_state_to,
    }


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


def load_policy(
    directory: str | Path,
    dtype: str | torch.dtype = "fp32",
    device: str | torch.device = "cpu",
    options: CheckpointOptions | None = None,
) -> LoadedPolicy:
    """Load a vlash, LeRobot or openpi policy directory (detected from its files)."""
    options = options or CheckpointOptions()
    layout = detect_layout(directory)
    unused = options.unused_by(layout)
    if unused:
        raise CheckpointError(f"{directory} is a {layout} policy directory, which takes no {', '.join(unused)}")
    if layout == "vlash":
        return _load_vlash(Path(directory), dtype, device)
    if layout == "lerobot":
        from vlash.policies.lerobot_dir import load_lerobot_policy

        return load_lerobot_policy(Path(directory), dtype, device, options)
    from vlash.policies.openpi_dir import load_openpi_policy

    return load_openpi_policy(Path(directory), dtype, device, options)


def _load_vlash(path: Path, dtype: str | torch.dtype, device: str | torch.device) -> LoadedPolicy:
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
        from vlash.policies.quantized.loading import load_quantized_model

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
