"""Load a LeRobot pi0.5 policy directory (what `PI05Policy.save_pretrained` and the processor pipelines write).

    config.json                  policy config ("type": "pi05", features, chunk size, relative-action keys, ...)
    model.safetensors            weights ("model.paligemma_with_expert...."; vlash.policies.pi05.weights maps them)
    policy_preprocessor.json     + its normalizer state file; policy_postprocessor.json + the unnormalizer's
    tokenizer/                   LeRobot >= 0.6.2 only; older checkpoints need `CheckpointOptions.tokenizer`

Two things changed between LeRobot releases that a checkpoint's numbers depend on, and config.json does not
say which release wrote it. The weights do: up to 0.4.x the VLM's token embedding is tied to its lm_head and
saved only as lm_head; from 0.5.0 both are saved. A 0.4.x checkpoint was trained with that release's inputs:
- the normalized state padded with zeros to `max_state_dim` (32) before it is binned into the prompt;
- resize-with-pad borders of -1 in [0, 1] image space, -3 after scaling to [-1, 1] (fixed in 0.5.0).
vlash reproduces the inputs of the release that saved the checkpoint and records which in the metadata.

LeRobot's arithmetic differs from openpi's in two places, and a LeRobot checkpoint gets LeRobot's (recorded in its
config and in the metadata's `arithmetic`): the sin/cos time embedding in float64 (`create_sinusoidal_pos_embedding`;
arguments reach 1571 rad, where fp32 is off by ~1e-4), and a resized image kept in floats (`resize_with_pad_torch`;
openpi rounds it to uint8). With both, vlash's actions match LeRobot 0.6.1's to ~3e-5 on its own tiny checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from vlash.errors import CheckpointError
from vlash.policies.formats.base import CheckpointOptions, LoadedPolicy, arithmetic
from vlash.policies.formats.layouts import NO_TOKENIZER, read_json_object
from vlash.policies.formats.lerobot_pipeline import read_lerobot_pipeline, relative_mask
from vlash.policies.pi05.config import Pi05Config, load_preset
from vlash.policies.pi05.weights import TIED_EMBEDDING, load_model, safetensors_keys
from vlash.policies.processing.processor import Pi05Processor
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer, TokenizerError

log = logging.getLogger(__name__)
UNSUPPORTED_FLAGS = ("use_visual_memory", "use_proprioceptive_memory")  # LeRobot's MEM memory variants
LEROBOT_04_PAD_VALUE = -3.0  # 0.4.x padded [0, 1] images with -1 before scaling to [-1, 1]


def _feature_dim(doc: dict[str, Any], section: str, key: str, source: Path) -> int:
    try:
        return int(doc[section][key]["shape"][0])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{source}: needs {section}[{key!r}].shape (the {key} size); {exc!r}") from None


def config_from_lerobot(doc: dict[str, Any], source: Path = Path("config.json")) -> tuple[Pi05Config, int, int]:
    """(model config, state dims, action dims) from a LeRobot pi05 config.json."""
    if doc.get("type") != "pi05":
        raise CheckpointError(f"{source}: LeRobot config type is {doc.get('type')!r}, vlash loads 'pi05'")
    variants = (doc.get("paligemma_variant", "gemma_2b"), doc.get("action_expert_variant", "gemma_300m"))
    if variants != ("gemma_2b", "gemma_300m"):
        raise CheckpointError(f"{source}: unsupported pi05 variants {variants}; vlash knows gemma_2b + gemma_300m")
    enabled = [flag for flag in UNSUPPORTED_FLAGS if doc.get(flag)]
    if enabled:
        raise CheckpointError(f"{source}: {', '.join(enabled)} is on; vlash does not implement LeRobot's memory")
    inputs = doc.get("input_features", {})
    cameras = [k.removeprefix("observation.images.") for k, v in inputs.items() if v.get("type") == "VISUAL"]
    cameras += [f"empty_camera_{i}" for i in range(doc.get("empty_cameras", 0))]
    if not cameras:
        raise CheckpointError(f"{source}: input_features has no VISUAL feature (a camera)")
    state_dims = _feature_dim(doc, "input_features", "observation.state", source)
    action_dims = _feature_dim(doc, "output_features", "action", source)
    config = load_preset("pi05").with_overrides(
        name="pi05-lerobot",
        camera_names=cameras,
        action_horizon=doc.get("chunk_size", 50),
        action_dim=doc.get("max_action_dim", 32),
        max_token_len=doc.get("tokenizer_max_length", 200),
        num_steps=doc.get("num_inference_steps", 10),
        time_embedding="fp64",  # LeRobot's create_sinusoidal_pos_embedding
    )
    return config, state_dims, action_dims


def _read_config(path: Path) -> dict[str, Any]:
    source = path / "config.json"
    if not source.is_file():
        raise CheckpointError(f"{source} not found: a LeRobot checkpoint has config.json next to its processor files")
    return read_json_object(source)


def saved_by_lerobot_04(weights: Path) -> bool:
    """True when the weights were saved by LeRobot <= 0.4 (the VLM embedding only as its tied lm_head)."""
    keys, _ = safetensors_keys(weights)
    tied_src, _ = TIED_EMBEDDING
    embed = "model.paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight"
    return ("model." + tied_src) in keys and embed not in keys


def _tokenizer(path: Path, options: CheckpointOptions, saved: Path | None) -> PromptTokenizer:
    for candidate in (options.tokenizer, saved, path):
        if candidate is None:
            continue
        try:
            return PromptTokenizer.from_dir(candidate)
        except TokenizerError:
            if candidate is not path:  # an explicit or saved tokenizer must load
                raise
    raise TokenizerError(NO_TOKENIZER["lerobot"].format(path=path))


def load_lerobot_policy(
    path: Path, dtype: str | torch.dtype, device: str | torch.device, options: CheckpointOptions
) -> LoadedPolicy:
    doc = _read_config(path)
    config, state_dims, action_dims = config_from_lerobot(doc, path / "config.json")
    pipeline = read_lerobot_pipeline(path)
    if bool(doc.get("use_relative_actions")) != (pipeline.relative is not None):
        log.warning("%s: config.json use_relative_actions disagrees with the pipelines; the pipelines run", path)
    if pipeline.tokenizer_max_length is not None:
        config = config.with_overrides(max_token_len=int(pipeline.tokenizer_max_length))
    config = options.sized(config)
    tokenizer = _tokenizer(path, options, pipeline.tokenizer_dir)  # before the weights: a missing one fails at once
    weights = path / "model.safetensors"
    model = load_model(config, weights, dtype=dtype, device=device)
    old = saved_by_lerobot_04(weights)
    encoder = Pi05PromptEncoder(
        tokenizer,
        max_len=config.max_token_len,
        state_dims=state_dims,
        pad_state_to=int(doc.get("max_state_dim", 32)) if old else None,
    )
    processor = Pi05Processor(
        config,
        pipeline.normalizer,
        encoder,
        action_dims=action_dims,
        antialias=False,  # LeRobot resizes with plain bilinear
        image_pad_value=LEROBOT_04_PAD_VALUE if old else -1.0,
        round_resized_images=False,  # and keeps the resized image in floats
        relative_mask=relative_mask(pipeline, action_dims),
    )
    generation = "0.4" if old else "0.5+"
    log.info("%s: LeRobot %s inputs (state padding, image borders)", path, generation)
    metadata = {"source": "lerobot", "lerobot_inputs": generation, "arithmetic": arithmetic(processor)}
    return LoadedPolicy(model, processor, metadata | {"lerobot_config": doc})
