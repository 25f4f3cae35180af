"""vlash's pi0.5 reproduces openpi's own pi0.5 (JAX, fp32, tiny random model) — the proof that real
checkpoints will work. Tolerances from the fixture README: 1e-3 on actions and velocities, 1e-4 on
image tokens and prefix output (valid rows only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.policies.openpi_fixture import load_reference
from vlash.sampling import FlowSampler, SamplerConfig


@pytest.fixture(scope="module")
def ref():
    return load_reference()


@pytest.fixture(scope="module")
def model(ref):
    return ref.model()


def _max_err(ours: torch.Tensor, theirs: np.ndarray, rows: np.ndarray | None = None) -> float:
    diff = np.abs(ours.detach().float().numpy() - theirs)
    return float(diff[rows].max() if rows is not None else diff.max())


@torch.no_grad()
def test_image_tokens_and_text_embeddings(ref, model):
    inputs = ref.inputs()
    batch, cams = inputs.image_masks.shape
    tokens = model.projector(model.vision(inputs.images.flatten(0, 1))).view(batch, cams, -1, 64)
    for i, cam in enumerate(ref.config.camera_names):
        assert _max_err(tokens[:, i], ref[f"intermediates/image_tokens/{cam}"]) < 1e-4, cam
    prefix, valid = model.embed_prefix(inputs)
    np.testing.assert_array_equal(valid.numpy(), ref["intermediates/prefix_mask"])
    text = prefix[:, -ref.config.max_token_len :]
    assert _max_err(text, ref["intermediates/text_embeddings"]) < 1e-5


@torch.no_grad()
def test_prefix_output_and_kv_cache(ref, model):
    cache, prefix_out = model.encode_prefix(ref.inputs())
    valid = ref["intermediates/prefix_mask"]
    assert _max_err(prefix_out, ref["intermediates/prefix_out"], valid) < 1e-4
    # ours: [L, B, K, P, hd]; openpi: [L, B, P, K, hd]
    keys, values = cache.keys.permute(0, 1, 3, 2, 4), cache.values.permute(0, 1, 3, 2, 4)
    assert _max_err(keys, ref["intermediates/kv_cache_k"], (slice(None), valid)) < 1e-4
    assert _max_err(values, ref["intermediates/kv_cache_v"], (slice(None), valid)) < 1e-4


@torch.no_grad()
def test_every_denoise_step_velocity(ref, model):
    cache = model.prefill(ref.inputs())
    times = ref["intermediates/steps/time"]
    for k in range(times.shape[0]):
        x_t = torch.from_numpy(ref["intermediates/steps/x_t"][k])
        tau = torch.from_numpy(times[k])[:, None].expand(-1, ref.config.action_horizon)
        v = model.denoise_step(x_t, tau, cache)
        assert _max_err(v, ref["intermediates/steps/v_t"][k]) < 1e-3, f"step {k}"


def test_sampled_actions_match_openpi(ref, model):
    cache = model.prefill(ref.inputs())
    sampler = FlowSampler(SamplerConfig(num_steps=ref.config.num_steps, schedule="constant"))
    velocity = lambda x, tau: model.denoise_step(x, tau, cache)  # noqa: E731
    with torch.no_grad():
        result = sampler.sample(velocity, torch.from_numpy(ref["inputs/noise"]))
    err = _max_err(result.actions, ref["outputs/actions"])
    assert err < 1e-3, err


@torch.no_grad()
def test_training_path_velocity(ref, model):
    x_t = torch.from_numpy(ref["loss/x_t"])
    tau = torch.from_numpy(ref["loss/time"])[:, None].expand(-1, ref.config.action_horizon)
    v = model.forward_joint(ref.inputs(), x_t, tau)
    assert _max_err(v, ref["loss/v_t"]) < 1e-3
    noise, actions = torch.from_numpy(ref["loss/noise"]), torch.from_numpy(ref["loss/actions"])
    loss = ((v - (noise - actions)) ** 2).mean(dim=-1)
    np.testing.assert_allclose(loss.numpy(), ref["loss/loss"], rtol=1e-3, atol=1e-4)


@torch.no_grad()
def test_masked_camera_pixels_do_not_change_actions(ref, model):
    """openpi's invariance: pixels of a masked camera (right wrist, row 1) cannot leak into the output."""
    inputs = ref.inputs()
    noise = torch.from_numpy(ref["inputs/noise"])
    tau = torch.ones(2, ref.config.action_horizon)
    v_before = model.denoise_step(noise, tau, model.prefill(inputs))
    inputs.images[1, 2] = torch.rand_like(inputs.images[1, 2]) * 2 - 1
    v_after = model.denoise_step(noise, tau, model.prefill(inputs))
    assert torch.equal(v_before[1], v_after[1])
    assert not inputs.image_masks[1, 2]
