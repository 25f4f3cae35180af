"""Policy directories (vlash's own and LeRobot's) load into a model + processor that act identically."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.policies.builders import write_lerobot_processor_files
from vlash.errors import CheckpointError, ShapeError
from vlash.policies.formats.base import CheckpointOptions
from vlash.policies.formats.lerobot import config_from_lerobot
from vlash.policies.formats.lerobot_pipeline import read_lerobot_pipeline
from vlash.policies.formats.loading import load_policy
from vlash.policies.formats.vlash_dir import save_policy
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random, save_weights
from vlash.policies.processing.normalization import FeatureNorm, Normalizer, NormMode
from vlash.policies.processing.processor import Observation, Pi05Processor
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer, TokenizerError
from vlash.sampling import FlowSampler, SamplerConfig

STATE_DIMS, ACTION_DIMS = 2, 3


def _normalizer() -> Normalizer:
    q = lambda lo, hi: {"q01": np.array(lo, np.float32), "q99": np.array(hi, np.float32)}  # noqa: E731
    return Normalizer(
        [
            FeatureNorm("observation.state", NormMode.QUANTILES, q([0.0, -1.0], [2.0, 3.0])),
            FeatureNorm("action", NormMode.QUANTILES, q([-1.0, 0.0, 5.0], [1.0, 4.0, 6.0])),
        ]
    )


def _observation(config, seed=0) -> Observation:
    rng = np.random.default_rng(seed)
    images = {name: rng.integers(0, 255, (96, 128, 3), dtype=np.uint8) for name in config.camera_names}
    return Observation(images=images, state=np.array([1.0, 2.5], np.float32), prompt="pick up the red cube")


def _act(model, processor, observation) -> np.ndarray:
    inputs = processor.preprocess([observation])
    noise = torch.randn(
        1, model.config.action_horizon, model.config.action_dim, generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        cache = model.prefill(inputs)
        result = FlowSampler(SamplerConfig(num_steps=4)).sample(lambda x, t: model.denoise_step(x, t, cache), noise)
    return processor.postprocess(result.actions)


def test_vlash_policy_dir_round_trip(tmp_path, tiny, tokenizer_dir):
    processor = Pi05Processor(
        tiny.config,
        _normalizer(),
        Pi05PromptEncoder(PromptTokenizer.from_dir(tokenizer_dir), tiny.config.max_token_len, state_dims=STATE_DIMS),
        action_dims=ACTION_DIMS,
    )
    obs = _observation(tiny.config)
    expected = _act(tiny, processor, obs)
    assert expected.shape == (1, tiny.config.action_horizon, ACTION_DIMS)
    out = save_policy(
        tmp_path / "policy",
        tiny,
        _normalizer(),
        tokenizer_dir / "tokenizer.json",
        action_dims=ACTION_DIMS,
        state_dims=STATE_DIMS,
        metadata={"made_by": "test"},
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "config.yaml",
        "model.safetensors",
        "stats.safetensors",
        "tokenizer.json",
        "vlash_files.json",  # what vlash wrote: --overwrite replaces these, nothing else (vlash.atomic)
    ]
    loaded = load_policy(out)
    assert loaded.metadata == {"made_by": "test"}
    np.testing.assert_array_equal(_act(loaded.model, loaded.processor, obs), expected)
    # saving again over an existing directory replaces it whole, leaving no temporaries behind
    save_policy(out, tiny, _normalizer(), tokenizer_dir / "tokenizer.json", action_dims=ACTION_DIMS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_failed_save_leaves_previous_policy_intact(tmp_path, tiny, tokenizer_dir):
    out = save_policy(tmp_path / "policy", tiny, _normalizer(), tokenizer_dir / "tokenizer.json", action_dims=3)
    before = (out / "model.safetensors").read_bytes()
    with pytest.raises(CheckpointError, match="tokenizer_file"):
        save_policy(out, tiny, _normalizer(), tmp_path / "nope.json", action_dims=3)
    bad_norm = Normalizer([])  # save_stats refuses nothing, but the loader needs state/action stats
    save_policy(tmp_path / "other", tiny, bad_norm, tokenizer_dir / "tokenizer.json", action_dims=3)
    with pytest.raises(ShapeError, match="no stats for 'observation.state'"):
        load_policy(tmp_path / "other")
    assert (out / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "policy"]


def test_lerobot_directory_loads_with_its_stats_and_local_tokenizer(tmp_path, tokenizer_dir):
    config = {
        "type": "pi05",
        "chunk_size": 50,
        "max_action_dim": 32,
        "tokenizer_max_length": 48,
        "input_features": {
            "observation.images.base_0_rgb": {"type": "VISUAL", "shape": [3, 224, 224]},
            "observation.state": {"type": "STATE", "shape": [STATE_DIMS]},
        },
        "output_features": {"action": {"type": "ACTION", "shape": [ACTION_DIMS]}},
    }
    full, state_dims, action_dims = config_from_lerobot(config)
    assert (full.vlm.width, full.camera_names, state_dims, action_dims) == (2048, ("base_0_rgb",), 2, 3)
    # a LeRobot directory with the tiny model's shapes: same code path, test-sized weights
    tiny = build_random(load_preset("pi05-tiny"), seed=7)
    (tmp_path / "config.json").write_text(json.dumps(config))
    save_weights(tiny, tmp_path / "model.safetensors", layout="lerobot")
    write_lerobot_processor_files(tmp_path)
    with pytest.raises(CheckpointError, match="does not fit the model"):  # full-size config vs tiny weights
        load_policy(tmp_path, options=CheckpointOptions(tokenizer=tokenizer_dir))
    loaded = load_policy(tmp_path, options=CheckpointOptions(tokenizer=tokenizer_dir, model_config=tiny.config))
    assert loaded.processor.action_dims == ACTION_DIMS and not loaded.processor.antialias
    assert loaded.metadata["arithmetic"] == {"time_embedding": "fp64", "resized_images": "float"}  # LeRobot's
    tiny.config = tiny.config.with_overrides(time_embedding="fp64")
    expected = Pi05Processor(
        tiny.config,
        read_lerobot_pipeline(tmp_path).normalizer,
        Pi05PromptEncoder(PromptTokenizer.from_dir(tokenizer_dir), tiny.config.max_token_len, state_dims=STATE_DIMS),
        action_dims=ACTION_DIMS,
        antialias=False,
        round_resized_images=False,
    )
    obs = _observation(tiny.config)
    np.testing.assert_array_equal(_act(loaded.model, loaded.processor, obs), _act(tiny, expected, obs))
    with pytest.raises(TokenizerError, match="--tokenizer"):
        load_policy(tmp_path, options=CheckpointOptions(model_config=tiny.config))
    with pytest.raises(CheckpointError, match="type is 'pi0'"):
        config_from_lerobot({**config, "type": "pi0"})


def test_processor_rejects_unknown_cameras_and_masks_missing_ones(tiny, tokenizer_dir):
    processor = Pi05Processor(
        tiny.config,
        _normalizer(),
        Pi05PromptEncoder(PromptTokenizer.from_dir(tokenizer_dir), tiny.config.max_token_len),
        action_dims=ACTION_DIMS,
    )
    obs = _observation(tiny.config)
    obs.images = {"top_cam": next(iter(obs.images.values()))}
    with pytest.raises(ShapeError, match="unknown cameras \\['top_cam'\\]"):
        processor.preprocess([obs])
    obs.images = {}
    inputs = processor.preprocess([obs])
    assert not inputs.image_masks.any() and inputs.token_masks[0].sum() > 5
    assert inputs.images.shape == (1, 1, 3, 112, 112)


def _relative_processor(config, tokenizer_dir, mask=(True, False, True)) -> Pi05Processor:
    encoder = Pi05PromptEncoder(PromptTokenizer.from_dir(tokenizer_dir), config.max_token_len, state_dims=3)
    return Pi05Processor(config, _normalizer(), encoder, action_dims=ACTION_DIMS, relative_mask=mask)


def test_relative_actions_round_trip_through_the_request_state(tiny, tokenizer_dir):
    processor = _relative_processor(tiny.config, tokenizer_dir)
    states = np.array([[0.5, 9.0, -2.0], [1.0, 7.0, 3.0]], np.float32)
    actions = np.random.default_rng(0).normal(size=(2, 5, ACTION_DIMS)).astype(np.float32)
    model_actions = processor.to_model_actions(actions, states)
    # relative dims are taken from the state before normalizing; the absolute dim 1 is not
    expected_rel = actions - states[:, None, :] * np.array([1, 0, 1], np.float32)
    np.testing.assert_allclose(model_actions, processor.normalizer.normalize("action", expected_rel), atol=1e-6)
    padded = torch.zeros(2, 5, tiny.config.action_dim)
    padded[..., :ACTION_DIMS] = torch.from_numpy(model_actions)
    np.testing.assert_allclose(processor.postprocess(padded, states), actions, atol=1e-5)
    with pytest.raises(ShapeError, match="relative to the state"):
        processor.postprocess(padded)
    with pytest.raises(ShapeError, match="does not match"):
        processor.postprocess(padded, states[:1])
    with pytest.raises(ShapeError, match="relative_mask has 2 entries"):
        _relative_processor(tiny.config, tokenizer_dir, mask=(True, True))


def test_relative_mask_is_saved_and_loaded(tmp_path, tiny, tokenizer_dir):
    out = save_policy(
        tmp_path / "p", tiny, _normalizer(), tokenizer_dir / "tokenizer.json", ACTION_DIMS, 3, relative_mask=(1, 0, 1)
    )
    assert load_policy(out).processor.relative_mask == (True, False, True)
    plain = save_policy(tmp_path / "q", tiny, _normalizer(), tokenizer_dir / "tokenizer.json", ACTION_DIMS)
    assert load_policy(plain).processor.relative_mask is None and not load_policy(plain).processor.relative
