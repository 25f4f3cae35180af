"""Parity with the real LeRobot 0.6.1: a tiny pi0.5 checkpoint written by LeRobot's own save code (shipped in
examples/lerobot_pi05_tiny/) and LeRobot's own tokens and actions for three observations with fixed noise
(tests/fixtures/lerobot_pi05_tiny/, see its README). Through every load path — the directory with tokenizer.json or
tokenizer.model, `vlash convert`'s output, `vlash serve` over ZeroMQ (given by Hugging Face repo id) — the tokens
are exact and the actions within 1e-4 at 224 px and 2e-3 after a resize, because a LeRobot checkpoint gets
LeRobot's arithmetic (time embedding in float64, resized images kept in floats), recorded in its metadata."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from robot_io.client import PolicyClient
from robot_io.protocol import Infer
from tests.policies.hub_cache import write_hub_repo
from tests.serve_process import ServeProcess
from tests.torch_threads import torch_threads
from vlash.engines import create_engine
from vlash.policies.formats.base import CheckpointOptions
from vlash.policies.formats.loading import load_policy
from vlash.policies.names.hub import PALIGEMMA_TOKENIZER
from vlash.policies.pi05.config import load_preset
from vlash.policies.processing.processor import Observation
from vlash.runtime.policy_runtime import PolicyRuntime, make_infer

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "lerobot_pi05_tiny"
CHECKPOINT, MODEL_CONFIG = SHIPPED / "pretrained_model", SHIPPED / "model_config.yaml"
TOKENIZERS = {"json": SHIPPED / "tokenizer" / "tokenizer.json", "model": SHIPPED / "tokenizer" / "tokenizer.model"}
REFERENCE = ROOT / "tests" / "fixtures" / "lerobot_pi05_tiny" / "reference.npz"
OBSERVATIONS = ("main", "prompt", "resize")
TOLERANCE = {"main": 1e-4, "prompt": 1e-4, "resize": 2e-3}  # absolute, robot units (actions up to 274)
CAMERAS = ("top", "wrist")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    with np.load(REFERENCE) as arrays:
        return {key: arrays[key] for key in arrays.files}


def _request(reference: dict, obs: str) -> Infer:
    images = {cam: reference[f"{obs}/image/{cam}"] for cam in CAMERAS}
    return make_infer(
        images, reference[f"{obs}/state"], str(reference[f"{obs}/task"]), seed=int(reference[f"{obs}/seed"])
    )


def _options(tokenizer: str) -> CheckpointOptions:
    return CheckpointOptions(tokenizer=TOKENIZERS[tokenizer], model_config=load_preset(str(MODEL_CONFIG)))


def _check(policy, reference: dict) -> None:
    assert policy.metadata["arithmetic"] == {"time_embedding": "fp64", "resized_images": "float"}
    runtime = PolicyRuntime(policy, create_engine("torch", model=policy.model))
    for obs in OBSERVATIONS:
        request = _request(reference, obs)
        inputs = policy.processor.preprocess([Observation(request.images, request.state, request.prompt)])
        np.testing.assert_array_equal(inputs.tokens.numpy(), reference[f"{obs}/tokens"])
        np.testing.assert_array_equal(inputs.token_masks.numpy(), reference[f"{obs}/token_mask"])
        actions = runtime.run(request).actions
        np.testing.assert_allclose(actions, reference[f"{obs}/actions"][0], atol=TOLERANCE[obs], rtol=0)


@pytest.mark.parametrize("tokenizer", ["json", "model"])
def test_the_lerobot_directory_acts_as_lerobot(reference, tokenizer):
    _check(load_policy(CHECKPOINT, options=_options(tokenizer)), reference)


def test_the_converted_policy_acts_as_lerobot(reference, tmp_path):
    out = tmp_path / "converted"
    cmd = [sys.executable, "-m", "vlash.cli.main", "convert", "--from", "lerobot", str(CHECKPOINT), "--out", str(out),
           "--tokenizer", str(TOKENIZERS["json"]), "--model-config", str(MODEL_CONFIG)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    _check(load_policy(out), reference)  # no options: the arithmetic travels in its config


def test_vlash_serve_answers_as_lerobot_with_both_named_by_hub_repo(reference, tmp_path, monkeypatch):
    """The checkpoint and pi0.5's tokenizer by Hugging Face repo id, as LeRobot users name them, from a hub cache
    built here (offline); the tokenizer is not even given: a LeRobot checkpoint without one gets pi0.5's."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    write_hub_repo(tmp_path / "hub", "lerobot/pi05_tiny", sorted(CHECKPOINT.iterdir()))
    write_hub_repo(tmp_path / "hub", PALIGEMMA_TOKENIZER, [TOKENIZERS["json"]])
    server = ServeProcess(["--checkpoint", "lerobot/pi05_tiny", "--model-config", str(MODEL_CONFIG)])
    try:
        with PolicyClient(server.endpoint, timeout_s=60.0) as client:
            client.connect()
            for i, obs in enumerate(OBSERVATIONS):
                request = _request(reference, obs)
                infer = Infer(
                    i + 1, 0, time.time_ns(), request.prompt, request.images, request.state, seed=request.seed
                )
                actions = client.infer(infer).actions
                np.testing.assert_allclose(actions, reference[f"{obs}/actions"][0], atol=TOLERANCE[obs], rtol=0)
    finally:
        assert server.stop() == 0, server.err
