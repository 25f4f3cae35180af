"""The torch engine's static programs captured as CUDA graphs (needs a GPU; skipped elsewhere): replays give the
eager engine's chunks, follow new observations and batch sizes, and build one graph per program."""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from robot_io.protocol import Infer
from vlash.engines import create_engine
from vlash.policies.formats.random_policy import random_policy
from vlash.runtime.policy_runtime import PolicyRuntime, make_infer

pytestmark = pytest.mark.gpu


def _requests(runtime: PolicyRuntime, seed: int) -> list[Infer]:
    size = runtime.config.vision.image_size
    rng = np.random.default_rng(seed)
    images = {name: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for name in runtime.config.camera_names}
    base = make_infer(images, np.array([0.1, -0.2], np.float32), "go to the goal", seed=seed)
    prefix = np.array([[0.1, 0.7], [-0.2, 0.3]], np.float32)
    return [base, replace(base, schedule="horizon-aware", prefix=prefix, seed=seed + 1)]


@pytest.mark.parametrize("graphs", ["chunk", "step"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_captured_programs_replay_the_eager_chunks(graphs, dtype):
    policy = random_policy("pi05-tiny", seed=2, dtype=dtype, device="cuda", cameras=2)
    eager = PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=10)
    engine = create_engine("torch", model=policy.model, graphs=graphs)
    graphed = PolicyRuntime(policy, engine, num_steps=10)
    tol = 1e-4 if dtype == "fp32" else 3e-2
    for seed in (1, 2):  # the second observation is copied into the static buffers of the first
        for request in _requests(eager, seed):
            got, want = graphed.run(request), eager.run(request)
            np.testing.assert_allclose(got.actions, want.actions, atol=tol, rtol=tol)
        batch = _requests(eager, seed) * 2  # batch 4: a second set of graphs
        for got, want in zip(graphed.run_batch(batch), eager.run_batch(batch), strict=True):
            np.testing.assert_allclose(got.actions, want.actions, atol=tol, rtol=tol)
    programs = engine._programs.programs
    assert len(programs) == len(set(programs)) and all(p.graph is not None for p in engine._programs._prefills.values())
    assert "cuda graphs" in engine.describe()["compile"]


def test_compiled_programs_are_captured_too():
    policy = random_policy("pi05-tiny", seed=2, dtype="bf16", device="cuda")
    eager = PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=10)
    engine = create_engine("torch", model=policy.model, graphs="chunk", compile_mode="default")
    graphed = PolicyRuntime(policy, engine, num_steps=10)
    for request in _requests(eager, 3):
        np.testing.assert_allclose(graphed.run(request).actions, eager.run(request).actions, atol=3e-2, rtol=3e-2)
