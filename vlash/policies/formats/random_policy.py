"""A policy with random weights for benchmarks and tests: a preset's model, a generated word-level tokenizer
and identity normalization stats (quantiles -1..1), so no checkpoint is needed."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from vlash.policies.formats.base import LoadedPolicy
from vlash.policies.formats.vlash_dir import save_policy
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.normalization import FeatureNorm, Normalizer, NormMode
from vlash.policies.processing.processor import Pi05Processor
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer
from vlash.policies.processing.word_tokenizer import train_tokenizer

DEFAULT_INSTRUCTIONS = ("go to the goal", "pick up the red cube", "push the block to the target")


def identity_normalizer(state_dims: int, action_dims: int) -> Normalizer:
    """Quantile stats with q01 = -1, q99 = 1: normalization leaves values (numerically) unchanged."""

    def feature(key: str, dims: int) -> FeatureNorm:
        stats = {"q01": -np.ones(dims, np.float32), "q99": np.ones(dims, np.float32)}
        return FeatureNorm(key, NormMode.QUANTILES, stats)

    return Normalizer([feature("observation.state", state_dims), feature("action", action_dims)])


def write_tokenizer(directory: str | Path, instructions: Sequence[str] = DEFAULT_INSTRUCTIONS) -> Path:
    """A tokenizer.json covering `instructions` (and the pi0.5 prompt scaffolding) in `directory`."""
    return train_tokenizer(instructions, directory)


def random_policy(
    preset: str,
    action_dims: int = 2,
    state_dims: int | None = None,
    seed: int = 0,
    dtype: str | torch.dtype = "fp32",
    device: str | torch.device = "cpu",
    instructions: Sequence[str] = DEFAULT_INSTRUCTIONS,
    cameras: int | None = None,
) -> LoadedPolicy:
    """An in-memory policy: `preset`'s shapes (with `cameras` camera slots where given), random weights, identity
    stats, a generated tokenizer."""
    state_dims = state_dims or action_dims
    config = load_preset(preset)
    config = config if cameras is None else config.with_cameras(cameras)
    model = build_random(config, dtype=dtype, device=device, seed=seed)
    with tempfile.TemporaryDirectory(prefix="vlash-tok-") as tmp:
        tokenizer = PromptTokenizer.from_dir(write_tokenizer(tmp, instructions).parent)
    encoder = Pi05PromptEncoder(tokenizer, max_len=config.max_token_len, state_dims=state_dims)
    processor = Pi05Processor(config, identity_normalizer(state_dims, action_dims), encoder, action_dims=action_dims)
    return LoadedPolicy(model, processor, {"random_weights": True, "preset": preset, "seed": seed})


def write_random_policy(
    directory: str | Path,
    preset: str,
    action_dims: int = 2,
    state_dims: int | None = None,
    seed: int = 0,
    relative_mask: tuple[bool, ...] | None = None,
) -> Path:
    """The same as a vlash policy directory on disk (tests, demos)."""
    state_dims = state_dims or action_dims
    model = build_random(load_preset(preset), seed=seed)
    with tempfile.TemporaryDirectory(prefix="vlash-tok-") as tmp:
        tokenizer = write_tokenizer(tmp)
        return save_policy(
            directory,
            model,
            identity_normalizer(state_dims, action_dims),
            tokenizer,
            action_dims=action_dims,
            state_dims=state_dims,
            metadata={"random_weights": True, "preset": preset, "seed": seed},
            relative_mask=relative_mask,
        )
