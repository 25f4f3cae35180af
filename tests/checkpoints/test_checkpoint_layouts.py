"""Every supported checkpoint layout loads into the model it was written from, with the inputs its trainer used:
in process (`load_policy`) and served through `vlash serve --checkpoint` over loopback, the chunk for a request
equals the original model's under the processor the layout implies (same noise seed)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from tests.checkpoints.layouts import (
    Stats,
    write_lerobot,
    write_openpi_pytorch,
)
from tests.policies.builders import train_wordlevel_tokenizer
from tests.serve_process import served
from vlash.engines import create_engine
from vlash.errors import CheckpointError
from vlash.policies.formats.base import CheckpointOptions, LoadedPolicy
from vlash.policies.formats.loading import load_policy
from vlash.policies.formats.vlash_dir import save_loaded_policy
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.normalization import EpsRule, FeatureNorm, Normalizer, NormMode
from vlash.policies.processing.processor import Pi05Processor
from vlash.policies.processing.tokenizer import Pi05PromptEncoder, PromptTokenizer, TokenizerError
from vlash.runtime.policy_runtime import PolicyRuntime, make_infer

CAMERA = "front"
LEROBOT_TOKENS, OPENPI_TOKENS = 160, 200  # the layouts' prompt lengths (tests/checkpoints/layouts.py, openpi's pi05)
STEPS = 3
PROMPT = "pick up the red cube"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return train_wordlevel_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def model():
    return build_random(load_preset("pi05-tiny"), seed=11)


def _request(state_dims: int, camera: str = CAMERA, seed: int = 7) -> Infer:
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (96, 128, 3), dtype=np.uint8)  # not square: the resize pads
    state = rng.uniform(-1.0, 1.0, state_dims).astype(np.float32)
    return make_infer({camera: image}, state, PROMPT, seed=seed)


def _quantiles(stats: Stats, rule: EpsRule, eps: float) -> Normalizer:
    feature = lambda key, lo, hi: FeatureNorm(key, NormMode.QUANTILES, {"q01": lo, "q99": hi}, eps, rule)  # noqa: E731
    return Normalizer(
        [
            feature("observation.state", stats.state_q01, stats.state_q99),
            feature("action", stats.action_q01, stats.action_q99),
        ]
    )


def _expected(model, stats: Stats, tokenizer: PromptTokenizer, camera: str, token_len: int, **settings) -> np.ndarray:
    """The original model's chunk under the processor the layout implies (the test's own statement of it)."""
    config = model.config.with_overrides(max_token_len=token_len)
    if camera not in config.camera_names:  # LeRobot names its cameras after the dataset's
        config = config.with_overrides(camera_names=[camera])
    prompt = {k: settings.pop(k) for k in ("pad_state_to", "state_in_prompt") if k in settings}
    rule, eps = settings.pop("rule", (EpsRule.LEROBOT, 1e-8))
    encoder = Pi05PromptEncoder(tokenizer, config.max_token_len, state_dims=len(stats.state_q01), **prompt)
    processor = Pi05Processor(config, _quantiles(stats, rule, eps), encoder, len(stats.action_q01), **settings)
    original = Pi05Model(config)
    original.load_state_dict(model.state_dict())  # the same weights; cameras and prompt length are not weights
    original.eval()
    runtime = PolicyRuntime(
        LoadedPolicy(original, processor, {}), create_engine("torch", model=original), num_steps=STEPS
    )
    return runtime.run(_request(len(stats.state_q01), camera)).actions


def _act(policy: LoadedPolicy, state_dims: int, camera: str = CAMERA) -> np.ndarray:
    runtime = PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=STEPS)
    return runtime.run(_request(state_dims, camera)).actions


LEROBOT_CASES = {  # version, relative -> what LeRobot's inputs were for checkpoints it saved
    ("0.4.4", False): {"pad_state_to": 32, "image_pad_value": -3.0, "antialias": False},
    ("0.5.1", True): {"antialias": False, "relative_mask": (True,) * 5 + (False,)},
    ("0.6.1", False): {"antialias": False},
    ("head", True): {"antialias": False, "relative_mask": (True,) * 5 + (False,)},
}


@pytest.mark.parametrize(("version", "relative"), LEROBOT_CASES)
def test_lerobot_checkpoints_act_as_the_model_they_were_written_from(tmp_path, model, tokenizer_dir, version, relative):
    stats = Stats.random(state_dims=6, action_dims=6, seed=1)
    path = write_lerobot(
        tmp_path / version, model, version, stats, tokenizer_dir / "tokenizer.json", [CAMERA], relative
    )
    tokenizer = None if version == "head" else tokenizer_dir  # only 0.6.2+ ships its tokenizer
    policy = load_policy(path, options=CheckpointOptions(tokenizer=tokenizer, model_config=load_preset("pi05-tiny")))
    assert policy.processor.relative_mask == LEROBOT_CASES[version, relative].get("relative_mask")
    assert policy.metadata["lerobot_inputs"] == ("0.4" if version == "0.4.4" else "0.5+")
    tokenizer = PromptTokenizer.from_dir(tokenizer_dir)
    expected = _expected(model, stats, tokenizer, CAMERA, LEROBOT_TOKENS, **LEROBOT_CASES[version, relative])
    np.testing.assert_allclose(_act(policy, 6), expected, atol=1e-5)


def test_lerobot_04_prompts_carry_32_state_bins_and_later_ones_the_real_count(tmp_path, model, tokenizer_dir):
    stats = Stats.random(6, 6)
    options = CheckpointOptions(tokenizer=tokenizer_dir, model_config=load_preset("pi05-tiny"))
    for version, bins in (("0.4.4", 32), ("0.6.1", 6)):
        path = write_lerobot(tmp_path / version, model, version, stats, tokenizer_dir / "tokenizer.json", [CAMERA])
        encoder = load_policy(path, options=options).processor.prompt_encoder
        prompt = encoder.format_prompt(PROMPT, np.zeros(6, np.float32))
        assert len(prompt.split("State: ")[1].split(";")[0].split()) == bins


def test_lerobot_errors_name_the_file_and_the_key(tmp_path, model, tokenizer_dir):
    stats = Stats.random(6, 6)
    options = CheckpointOptions(tokenizer=tokenizer_dir, model_config=load_preset("pi05-tiny"))
    path = write_lerobot(tmp_path / "p", model, "head", stats, tokenizer_dir / "tokenizer.json", [CAMERA])
    pre = json.loads((path / "policy_preprocessor.json").read_text())
    pre["steps"].insert(2, {"registry_name": "my_fancy_augmentation", "config": {}})
    (path / "policy_preprocessor.json").write_text(json.dumps(pre))
    with pytest.raises(CheckpointError, match=r"policy_preprocessor.json.*steps\[2\] 'my_fancy_augmentation'"):
        load_policy(path, options=options)
    path = write_lerobot(tmp_path / "q", model, "0.5.1", stats, tokenizer_dir / "tokenizer.json", [CAMERA], True)
    post = json.loads((path / "policy_postprocessor.json").read_text())
    post["steps"][1]["config"]["enabled"] = False
    (path / "policy_postprocessor.json").write_text(json.dumps(post))
    with pytest.raises(CheckpointError, match="absolute_actions_processor is off"):
        load_policy(path, options=options)
    path = write_lerobot(tmp_path / "r", model, "0.6.1", stats, tokenizer_dir / "tokenizer.json", [CAMERA])
    config = json.loads((path / "config.json").read_text())
    del config["output_features"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"config.json: needs output_features\['action'\].shape"):
        load_policy(path, options=options)
    path = write_lerobot(tmp_path / "s", model, "0.6.1", stats, tokenizer_dir / "tokenizer.json", [CAMERA])
    (path / "policy_preprocessor_step_3_normalizer_processor.safetensors").unlink()
    with pytest.raises(Exception, match="step_3_normalizer_processor.safetensors"):
        load_policy(path, options=options)
    path = write_lerobot(tmp_path / "t", model, "0.6.1", stats, tokenizer_dir / "tokenizer.json", [CAMERA])
    with pytest.raises(TokenizerError, match="--tokenizer"):  # before 0.6.2 LeRobot saves no tokenizer
        load_policy(path, options=CheckpointOptions(model_config=load_preset("pi05-tiny")))


def test_openpi_pytorch_checkpoint_acts_as_its_model(tmp_path, model, tokenizer_dir):
    stats = Stats.random(8, 7, seed=2)
    path = write_openpi_pytorch(tmp_path / "pi05_droid", model, stats, asset_id="droid")
    options = CheckpointOptions(tokenizer=tokenizer_dir, model_config=load_preset("pi05-tiny"))
    policy = load_policy(path, options=options)
    assert policy.config.camera_names == ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")
    assert policy.metadata["asset_id"] == "droid" and policy.processor.action_dims == 7
    tokenizer = PromptTokenizer.from_dir(tokenizer_dir)
    openpi = {"rule": (EpsRule.OPENPI, 1e-6)}
    reference = Pi05Model(model.config.with_overrides(camera_names=list(policy.config.camera_names)))
    reference.load_state_dict(model.state_dict())  # 3 camera slots, the same parameters
    expected = _expected(reference, stats, tokenizer, "base_0_rgb", OPENPI_TOKENS, **openpi)
    np.testing.assert_allclose(_act(policy, 8, "base_0_rgb"), expected, atol=1e-5)
    # pi05_libero leaves the state out of the prompt; pi05_aloha predicts its joints relative to the state
    libero = load_policy(path, options=replace(options, state_in_prompt=False))
    expected = _expected(reference, stats, tokenizer, "base_0_rgb", OPENPI_TOKENS, state_in_prompt=False, **openpi)
    np.testing.assert_allclose(_act(libero, 8, "base_0_rgb"), expected, atol=1e-5)
    mask = (True, True, True, False, True, True, False)
    aloha = load_policy(path, options=replace(options, relative_mask=mask))
    expected = _expected(reference, stats, tokenizer, "base_0_rgb", OPENPI_TOKENS, relative_mask=mask, **openpi)
    np.testing.assert_allclose(_act(aloha, 8, "base_0_rgb"), expected, atol=1e-5)


def test_openpi_checkpoint_errors(tmp_path, model, tokenizer_dir):
    stats = Stats.random(8, 7)
    path = write_openpi_pytorch(tmp_path / "p", model, stats, asset_id="droid")
    options = CheckpointOptions(tokenizer=tokenizer_dir, model_config=load_preset("pi05-tiny"))
    (path / "assets" / "trossen").mkdir()
    (path / "assets" / "trossen" / "norm_stats.json").write_text((path / "assets/droid/norm_stats.json").read_text())
    with pytest.raises(CheckpointError, match=r"several \(droid, trossen\): choose one with --asset-id"):
        load_policy(path, options=options)
    assert load_policy(path, options=replace(options, asset_id="trossen")).metadata["asset_id"] == "trossen"
    with pytest.raises(TokenizerError, match="paligemma_tokenizer.model"):
        load_policy(path, options=CheckpointOptions(model_config=load_preset("pi05-tiny"), asset_id="droid"))
    with pytest.raises(CheckpointError, match="relative mask has 2 entries"):
        load_policy(path, options=replace(options, asset_id="droid", relative_mask=(True, False)))
    save_loaded_policy(tmp_path / "v", load_policy(path, options=replace(options, asset_id="droid")))
    with pytest.raises(CheckpointError, match="is a vlash policy directory, which takes no tokenizer"):
        load_policy(tmp_path / "v", options=CheckpointOptions(tokenizer=tokenizer_dir))


def test_a_converted_policy_acts_as_its_source(tmp_path, model, tokenizer_dir):
    stats = Stats.random(6, 6)
    path = write_lerobot(tmp_path / "lr", model, "0.4.4", stats, tokenizer_dir / "tokenizer.json", [CAMERA], False)
    source = load_policy(
        path, options=CheckpointOptions(tokenizer=tokenizer_dir, model_config=load_preset("pi05-tiny"))
    )
    converted = load_policy(save_loaded_policy(tmp_path / "vlash", source))
    assert converted.processor.prompt_encoder.pad_state_to == 32 and converted.processor.image_pad_value == -3.0
    np.testing.assert_array_equal(_act(converted, 6), _act(source, 6))


@pytest.mark.slow
def test_each_layout_served_through_the_cli_equals_the_model_in_process(tmp_path, model, tokenizer_dir):
    """`vlash serve --checkpoint DIR` in a subprocess, a client over 127.0.0.1: the served chunk is the in-process
    policy's for the same request and seed, for every layout."""
    stats6, stats8 = Stats.random(6, 6, seed=4), Stats.random(8, 7, seed=5)
    tok = tokenizer_dir / "tokenizer.json"
    layouts = {
        "lerobot-0.4.4": (write_lerobot(tmp_path / "a", model, "0.4.4", stats6, tok, [CAMERA]), CAMERA, 6),
        "lerobot-0.5.1-relative": (
            write_lerobot(tmp_path / "d", model, "0.5.1", stats6, tok, [CAMERA], True),
            CAMERA,
            6,
        ),
        "lerobot-head-relative": (write_lerobot(tmp_path / "b", model, "head", stats6, tok, [CAMERA], True), CAMERA, 6),
        "openpi-pytorch": (write_openpi_pytorch(tmp_path / "c", model, stats8), "base_0_rgb", 8),
    }
    for name, (path, camera, state_dims) in layouts.items():
        flags = ["--model-config", "pi05-tiny"] + ([] if "head" in name else ["--tokenizer", str(tokenizer_dir)])
        options = CheckpointOptions(
            tokenizer=None if "head" in name else tokenizer_dir, model_config=load_preset("pi05-tiny")
        )
        local = _act(load_policy(path, options=options), state_dims, camera)
        request = _request(state_dims, camera)
        with served(["--checkpoint", str(path), "--steps", str(STEPS), *flags]) as endpoint:
            infer = Infer(1, 0, time.time_ns(), PROMPT, dict(request.images), request.state, seed=request.seed)
            with PolicyClient(endpoint, timeout_s=60.0) as client:
                remote = client.infer(infer).actions
        np.testing.assert_allclose(remote, local, atol=1e-5, err_msg=name)
        assert remote.shape == local.shape == (model.config.action_horizon, 6 if state_dims == 6 else 7)


def test_bf16_openpi_weights_load_as_their_rounded_values(tmp_path, model, tokenizer_dir):
    stats = Stats.random(8, 7)
    path = write_openpi_pytorch(tmp_path / "bf16", model, stats, dtype=torch.bfloat16)
    policy = load_policy(
        path, options=CheckpointOptions(tokenizer=tokenizer_dir, model_config=load_preset("pi05-tiny"))
    )
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(policy.model.state_dict()[name], tensor.to(torch.bfloat16).float(), msg=name)
