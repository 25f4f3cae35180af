"""End-to-end fixtures: a real `PolicyServer` on tcp loopback serving the shipped simulation policy when it
exists (checkpoints/pi05-tiny-sim), else a random pi05-micro policy written here; simulated robots drive it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.conftest import write_policy
from tests.torch_threads import torch_threads
from vlash.engines import create_engine
from vlash.policies.formats.loading import load_policy
from vlash.policies.names.shipped import shipped_root
from vlash.runtime.metadata import policy_metadata
from vlash.runtime.policy_runtime import PolicyRuntime
from vlash.server.config import ServerConfig
from vlash.server.server import PolicyServer
from vlash.sim.robot import SimRobot
from vlash.sim.tasks.reach import ReachConfig

SHIPPED = "pi05-tiny-sim"
EPISODE_STEPS = 30  # short reach episodes (30 control steps: 1 s at 30 Hz) so every mode finishes one quickly
MICRO_STEPS = 4
SLOW_SERVER_MS = 300.0  # extra latency of `slow_server`'s chunks (70 ms idle: ~370 ms, as at load 5-9)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="session")
def e2e_policy_dir(tmp_path_factory) -> Path:
    shipped = shipped_root() / SHIPPED
    if (shipped / "config.yaml").is_file():
        return shipped
    return write_policy(tmp_path_factory.mktemp("e2e"))


@pytest.fixture(scope="session")
def runtime(e2e_policy_dir) -> PolicyRuntime:
    policy = load_policy(e2e_policy_dir)
    steps = None if e2e_policy_dir.name == SHIPPED else MICRO_STEPS
    return PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=steps)


def serve(runtime: PolicyRuntime, bind: str = "tcp://127.0.0.1:0", inject_latency_ms: float = 0.0) -> PolicyServer:
    """A started server whose model thread has run one request (its first, cold one is not timed by a robot).
    `inject_latency_ms`: each chunk takes that much longer (a machine that many ms slower per chunk)."""
    config = ServerConfig(bind=bind, warm_up_runs=1, inject_latency_ms=inject_latency_ms)
    server = PolicyServer(runtime, policy_metadata(runtime, "e2e", "torch", "fp32"), config)
    server.start()
    return server


@pytest.fixture
def server(runtime):
    srv = serve(runtime)
    yield srv
    srv.stop()


@pytest.fixture
def slow_server(runtime):
    """A server ~5x slower than idle (what load 5-9 does to this machine): the tests' timing scales with it."""
    srv = serve(runtime, inject_latency_ms=SLOW_SERVER_MS)
    yield srv
    srv.stop()


def sim_robot(camera: str, seed: int = 0, max_steps: int = EPISODE_STEPS, endless: bool = False) -> SimRobot:
    """sim:reach with short episodes; its camera is named after the policy's (no name-matching warning).
    `endless`: targets cannot be touched, so the episode only ends at max_steps."""
    task = ReachConfig(max_steps=max_steps, touch_radius=1e-9) if endless else ReachConfig(max_steps=max_steps)
    return SimRobot("reach", seed=seed, camera=camera, env_options={"task_config": task})
