"""pi05 model: the prefill / denoise_step split equals one joint forward; per-token time; shape errors."""

from __future__ import annotations

import pytest
import torch

from vlash.errors import ShapeError
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.weights import build_random


@pytest.fixture(scope="module")
def two_camera_tiny():
    config = load_preset("pi05-tiny").with_overrides(camera_names=["base_0_rgb", "wrist_0_rgb"])
    return build_random(config, seed=1)


@pytest.mark.parametrize("per_token_time", [False, True])
def test_cached_denoise_step_equals_joint_forward(two_camera_tiny, per_token_time):
    model, cfg = two_camera_tiny, two_camera_tiny.config
    inputs = random_inputs(cfg, batch=2, valid_tokens=(cfg.max_token_len, 9), masked_camera=(1, 1))
    x_t = torch.randn(2, cfg.action_horizon, cfg.action_dim)
    tau = torch.rand(2, cfg.action_horizon) if per_token_time else torch.full((2, cfg.action_horizon), 0.7)
    with torch.no_grad():
        cache = model.prefill(inputs)
        cached = model.denoise_step(x_t, tau, cache)
        joint = model.forward_joint(inputs, x_t, tau)
        full_cache, _ = model.encode_prefix(inputs)  # runs the last layer's queries and MLP that prefill skips
    torch.testing.assert_close(cached, joint, atol=1e-5, rtol=0)
    for name in ("keys", "values", "suffix_bias", "suffix_cos", "suffix_sin"):
        torch.testing.assert_close(getattr(cache, name), getattr(full_cache, name), atol=0, rtol=0)


def test_per_token_time_conditions_each_action(two_camera_tiny):
    model, cfg = two_camera_tiny, two_camera_tiny.config
    inputs = random_inputs(cfg, batch=1)
    x_t = torch.randn(1, cfg.action_horizon, cfg.action_dim)
    with torch.no_grad():
        cache = model.prefill(inputs)
        base = model.denoise_step(x_t, torch.full((1, cfg.action_horizon), 0.5), cache)
        tau = torch.full((1, cfg.action_horizon), 0.5)
        tau[0, 0] = 0.0
        changed = model.denoise_step(x_t, tau, cache)
    assert not torch.allclose(base[0, 0], changed[0, 0])  # its own condition changed
    assert not torch.allclose(base[0, 1:], changed[0, 1:])  # others see it through attention


def test_one_time_per_row_equals_the_same_time_on_every_token(two_camera_tiny):
    model, cfg = two_camera_tiny, two_camera_tiny.config
    inputs = random_inputs(cfg, batch=2, valid_tokens=(cfg.max_token_len, 9))
    x_t, tau = torch.randn(2, cfg.action_horizon, cfg.action_dim), torch.tensor([[0.8], [0.3]])
    with torch.no_grad():
        cache = model.prefill(inputs)
        shared = model.denoise_step(x_t, tau, cache)
        per_token = model.denoise_step(x_t, tau.expand(2, cfg.action_horizon), cache)
        joint = model.forward_joint(inputs, x_t, tau)
    torch.testing.assert_close(shared, per_token, atol=1e-5, rtol=0)
    torch.testing.assert_close(joint, per_token, atol=1e-5, rtol=0)
    assert not torch.allclose(shared[0], shared[1])  # each row its own time


def test_padding_tokens_do_not_change_velocity(two_camera_tiny):
    model, cfg = two_camera_tiny, two_camera_tiny.config
    inputs = random_inputs(cfg, batch=1, valid_tokens=(7,))
    x_t, tau = torch.randn(1, cfg.action_horizon, cfg.action_dim), torch.rand(1, cfg.action_horizon)
    with torch.no_grad():
        before = model.denoise_step(x_t, tau, model.prefill(inputs))
        inputs.tokens[0, 7:] = 5  # padded ids are masked: any value gives the same actions
        after = model.denoise_step(x_t, tau, model.prefill(inputs))
    assert torch.equal(before, after)


def test_bad_shapes_raise_shape_error(two_camera_tiny):
    model, cfg = two_camera_tiny, two_camera_tiny.config
    inputs = random_inputs(cfg, batch=1)
    inputs.images = inputs.images[:, :1]
    with pytest.raises(ShapeError, match="images"):
        model.prefill(inputs)
    cache = model.prefill(random_inputs(cfg, batch=1))
    with pytest.raises(ShapeError, match="tau"):
        model.denoise_step(torch.zeros(1, cfg.action_horizon, cfg.action_dim), torch.zeros(1), cache)
    with pytest.raises(ShapeError, match="tau"):  # neither per token nor one per row
        model.denoise_step(torch.zeros(1, cfg.action_horizon, cfg.action_dim), torch.zeros(1, 2), cache)
    with pytest.raises(ShapeError, match="x_t"):
        model.denoise_step(torch.zeros(1, 3, cfg.action_dim), torch.zeros(1, 3), cache)


def test_bf16_model_tracks_fp32(two_camera_tiny):
    cfg = two_camera_tiny.config
    inputs = random_inputs(cfg, batch=1)
    x_t, tau = torch.randn(1, cfg.action_horizon, cfg.action_dim), torch.rand(1, cfg.action_horizon)
    bf16 = build_random(cfg, dtype="bf16", seed=1)
    with torch.no_grad():
        ref = two_camera_tiny.denoise_step(x_t, tau, two_camera_tiny.prefill(inputs))
        low = bf16.denoise_step(x_t, tau, bf16.prefill(inputs))
    assert low.dtype == torch.bfloat16
    cos = torch.nn.functional.cosine_similarity(ref.flatten(), low.float().flatten(), dim=0)
    assert cos > 0.99


def test_with_cameras_keeps_the_first_names_and_adds_extras():
    from vlash.errors import ConfigError

    cfg = load_preset("pi05")
    assert cfg.with_cameras(1).camera_names == ("base_0_rgb",)
    assert cfg.with_cameras(4).camera_names[-1] == "extra_0_rgb" and cfg.with_cameras(4).num_cameras == 4
    with pytest.raises(ConfigError, match="camera count must be >= 1"):
        cfg.with_cameras(0)


def test_forward_joint_can_return_the_prefix_stream_entering_a_layer(two_camera_tiny):
    model, cfg = two_camera_tiny, two_camera_tiny.config
    inputs = random_inputs(cfg, batch=2)
    x_t, tau = torch.randn(2, cfg.action_horizon, cfg.action_dim), torch.full((2, cfg.action_horizon), 0.7)
    with torch.no_grad():
        plain = model.forward_joint(inputs, x_t, tau)
        v0, first = model.forward_joint(inputs, x_t, tau, prefix_layer=0)
        v_last, last = model.forward_joint(inputs, x_t, tau, prefix_layer=cfg.vlm.depth)
        _, prefix_out = model.encode_prefix(inputs)
    torch.testing.assert_close(v0, plain, atol=0, rtol=0)  # tapping does not change the velocities
    # nor does running the last layer's prefix output, which `plain` skips
    torch.testing.assert_close(v_last, plain, atol=1e-5, rtol=0)
    torch.testing.assert_close(first, model.embed_prefix(inputs)[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(model.vlm.final_norm(last), prefix_out, atol=1e-5, rtol=0)
    with pytest.raises(ShapeError, match="prefix_layer"):
        model.forward_joint(inputs, x_t, tau, prefix_layer=cfg.vlm.depth + 1)


def test_prefix_stream_matches_the_joint_forward_tap(two_camera_tiny):
    model, cfg = two_camera_tiny, two_camera_tiny.config
    inputs = random_inputs(cfg, batch=2)
    x_t, tau = torch.randn(2, cfg.action_horizon, cfg.action_dim), torch.full((2, cfg.action_horizon), 0.3)
    with torch.no_grad():
        for layer in (0, cfg.vlm.depth - 1, cfg.vlm.depth):
            _, tapped = model.forward_joint(inputs, x_t, tau, prefix_layer=layer)
            torch.testing.assert_close(model.prefix_stream(inputs, layer), tapped, atol=1e-5, rtol=0)
    with pytest.raises(ShapeError, match="prefix_layer must be in"):
        model.prefix_stream(inputs, -1)
