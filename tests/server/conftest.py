"""Shared fixtures of the server tests: tiny random policy directories (tokenizer and stats built here),
runtimes over them, and a live loopback server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import zmq

from tests.policies.builders import train_wordlevel_tokenizer
from tests.torch_threads import torch_threads
from vlash.engines import create_engine
from vlash.policies.formats.loading import load_policy
from vlash.policies.formats.vlash_dir import save_policy
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.normalization import FeatureNorm, Normalizer, NormMode
from vlash.policies.processing.transforms import StateActionTransform
from vlash.runtime.metadata import policy_metadata
from vlash.runtime.policy_runtime import PolicyRuntime
from vlash.server.config import ServerConfig
from vlash.server.server import PolicyServer

MICRO = Path(__file__).parents[1] / "train" / "pi05-micro.yaml"  # ~0.1M parameters: fast on a busy CPU
PROMPT = "pick up the red cube"
STEPS = 4


@pytest.fixture(autouse=True, scope="session")
def _few_threads():
    with torch_threads(1):
        yield


def write_policy(
    directory: Path, relative: bool = False, preset: str | Path = MICRO, transform: StateActionTransform | None = None
) -> Path:
    """A random-weight pi0.5 policy directory with 2 action/state dims and non-trivial quantile stats (planning
    through `transform` when given)."""
    tok = train_wordlevel_tokenizer(directory / "tok")
    stats = {"q01": np.array([-1.0, 0.0], np.float32), "q99": np.array([3.0, 2.0], np.float32)}
    norm = Normalizer(
        [FeatureNorm("observation.state", NormMode.QUANTILES, stats), FeatureNorm("action", NormMode.QUANTILES, stats)]
    )
    model = build_random(load_preset(preset), seed=3)
    mask = (True, True) if relative else None
    return save_policy(
        directory / "policy",
        model,
        norm,
        tok / "tokenizer.json",
        action_dims=2,
        state_dims=2,
        relative_mask=mask,
        transform=transform,
    )


def make_runtime(directory: Path, num_steps: int = STEPS, schedule: str = "constant") -> PolicyRuntime:
    policy = load_policy(directory)
    return PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=num_steps, schedule=schedule)


def image(runtime_or_size, seed: int = 0) -> np.ndarray:
    size = runtime_or_size if isinstance(runtime_or_size, int) else runtime_or_size.config.vision.image_size
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory) -> Path:
    return write_policy(tmp_path_factory.mktemp("absolute"))


@pytest.fixture(scope="session")
def relative_policy_dir(tmp_path_factory) -> Path:
    return write_policy(tmp_path_factory.mktemp("relative"), relative=True)


@contextmanager
def raw_dealer(endpoint: str) -> Iterator[zmq.Socket]:
    """A bare DEALER on `endpoint` (its own Context, LINGER 0): sends bytes no PolicyClient would."""
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    try:
        yield socket
    finally:
        socket.close(linger=0)
        context.term()


def start_server(directory: Path, **config) -> PolicyServer:
    runtime = make_runtime(directory, schedule=config.get("schedule", "constant"))
    config.setdefault("bind", "tcp://127.0.0.1:0")
    server = PolicyServer(runtime, policy_metadata(runtime, "micro", "torch", "fp32"), ServerConfig(**config))
    server.start()
    return server


@pytest.fixture(scope="module")
def server(policy_dir):
    srv = start_server(policy_dir)
    yield srv
    srv.stop()
