"""Checkpoint loading: LeRobot / openpi-PyTorch layouts by key mapping, clear errors, full-size layout."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.conftest import FIXTURES
from vlash.errors import CheckpointError
from vlash.policies.pi05 import Pi05Model, load_preset
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.weights import (
    UNUSED_KEYS,
    build_random,
    export_state_dict,
    load_model,
    save_weights,
    to_vlash_key,
)
from vlash.sampling import FlowSampler, SamplerConfig


@pytest.fixture(scope="module")
def tiny():
    return build_random(load_preset("pi05-tiny"), seed=3)


def _actions(model, seed=0):
    cfg = model.config
    cache = model.prefill(random_inputs(cfg, batch=1, seed=seed))
    noise = torch.randn(1, cfg.action_horizon, cfg.action_dim, generator=torch.Generator().manual_seed(seed))
    sampler = FlowSampler(SamplerConfig(num_steps=cfg.num_steps))
    with torch.no_grad():
        return sampler.sample(lambda x, tau: model.denoise_step(x, tau, cache), noise).actions


@pytest.mark.parametrize("layout", ["lerobot", "openpi-pytorch", "vlash"])
def test_checkpoint_in_each_layout_gives_identical_actions(tiny, tmp_path, layout):
    path = tmp_path / "model.safetensors"
    save_weights(tiny, path, layout=layout)
    keys = load_file(path).keys()
    if layout == "lerobot":
        assert all(k.startswith("model.") for k in keys)
    loaded = load_model(tiny.config, path)
    assert torch.equal(_actions(tiny), _actions(loaded))


def test_tied_lm_head_stands_in_for_missing_embedding(tiny, tmp_path):
    state = export_state_dict(tiny, "lerobot")
    embed = state.pop("model.paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight")
    state["model." + UNUSED_KEYS[0]] = embed.clone()
    save_file(state, tmp_path / "m.safetensors")
    loaded = load_model(tiny.config, tmp_path / "m.safetensors")
    assert torch.equal(loaded.vlm.embed_tokens.weight, tiny.vlm.embed_tokens.weight)


def test_bf16_load_casts_every_tensor(tiny, tmp_path):
    save_weights(tiny, tmp_path / "m.safetensors", layout="lerobot")
    loaded = load_model(tiny.config, tmp_path / "m.safetensors", dtype="bf16")
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    assert not any(p.is_meta for p in loaded.parameters())


def test_mismatched_checkpoint_lists_every_problem(tiny, tmp_path):
    state = export_state_dict(tiny, "lerobot")
    state.pop("model.action_out_proj.bias")
    state["model.paligemma_with_expert.surprise.weight"] = torch.zeros(2)
    key = "model.time_mlp_in.weight"
    state[key] = torch.zeros(3, 3)
    save_file(state, tmp_path / "bad.safetensors")
    with pytest.raises(CheckpointError) as err:
        load_model(tiny.config, tmp_path / "bad.safetensors")
    text = str(err.value)
    assert "missing keys (2)" in text and "action_out_proj.bias" in text and "time_mlp_in.weight" in text
    assert "unexpected keys (1)" in text and "surprise.weight" in text
    assert "shape mismatches (1)" in text and "checkpoint (3, 3) vs model (128, 128)" in text


def test_wrong_config_reports_shape_mismatch(tiny, tmp_path):
    save_weights(tiny, tmp_path / "m.safetensors")
    other = tiny.config.with_overrides(action_horizon=10, vocab_size=512)
    with pytest.raises(
        CheckpointError, match="embed_tokens.weight: checkpoint \\(1024, 192\\) vs model \\(512, 192\\)"
    ) as err:
        load_model(other, tmp_path / "m.safetensors")
    first = str(err.value).splitlines()[0]  # the line a command's error starts with: what to do about it
    assert f"other shapes than {other.name}'s" in first and "--model-config PRESET|YAML" in first, first
    assert "the preset it was made from" in first


def test_corrupt_and_absent_files_raise_checkpoint_error(tiny, tmp_path):
    path = tmp_path / "m.safetensors"
    save_weights(tiny, path)
    data = path.read_bytes()
    path.write_bytes(data[:8] + b"{garbage" + data[16:])
    with pytest.raises(CheckpointError, match="cannot read"):
        load_model(tiny.config, path)
    path.write_bytes(data[: len(data) // 2])  # truncated download
    with pytest.raises(CheckpointError, match="cannot read"):
        load_model(tiny.config, path)
    with pytest.raises(CheckpointError, match="no weights file"):
        load_model(tiny.config, tmp_path / "absent.safetensors")


def test_full_size_preset_matches_lerobot_layout_exactly():
    """Every tensor of a real LeRobot pi0.5 checkpoint maps onto the full-size preset with its shape."""
    layout = json.loads((FIXTURES / "lerobot_pi05_layout.json").read_text())
    with torch.device("meta"):
        model = Pi05Model(load_preset("pi05"))
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    mapped = {}
    for key, shape in layout["tensors"].items():
        name = to_vlash_key(key, "lerobot")
        if name is not None:
            assert ours.get(name) == tuple(shape), key
            mapped[name] = shape
    assert set(mapped) == set(ours)
    dropped = sum(math.prod(layout["tensors"]["model." + k]) for k in UNUSED_KEYS)
    total = sum(p.numel() for p in model.parameters())
    assert total == 3_353_433_872
    assert total + dropped == layout["param_count"]


def test_weights_off_a_64_byte_boundary_are_copied_onto_one_and_ties_survive():
    from vlash.policies.pi05.weights import ALIGNMENT, aligned_state

    buffer = torch.arange(200, dtype=torch.float32)
    offset = buffer[6:70].view(8, 8)  # 24 bytes past an aligned start: a safetensors tensor at an odd offset
    aligned = torch.ones(4, 4)
    out = aligned_state({"a": offset, "tied": offset, "b": aligned})
    assert offset.data_ptr() % ALIGNMENT and out["a"].data_ptr() % ALIGNMENT == 0
    assert torch.equal(out["a"], offset) and out["a"] is out["tied"]
    assert out["b"] is aligned
