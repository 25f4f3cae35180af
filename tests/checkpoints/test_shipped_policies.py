"""The policies shipped in checkpoints/ load and act: the augmented default of the demo and the baseline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robot_io.protocol import Infer
from vlash.eval.policies import LearnedPolicy
from vlash.policies.formats.loading import load_policy
from vlash.policies.names.shipped import shipped_policy_dir
from vlash.sim import make_env

SHIPPED = {"pi05-tiny-sim": True, "pi05-tiny-sim-baseline": False}  # name -> trained with both augmentations


@pytest.mark.parametrize(("name", "augmented"), SHIPPED.items())
def test_shipped_policy_loads_and_acts_from_the_state_it_is_given(name, augmented):
    torch.set_num_threads(1)
    policy = load_policy(shipped_policy_dir(name))
    meta = policy.metadata
    assert meta["trained_by"] == "vlash.train" and meta["complete"] and "vlash train" in meta["command"]
    assert meta["augment"]["future_state"] is augmented and meta["augment"]["prefix_mix"] is augmented
    assert policy.processor.relative  # chunks relative to the state the request carries
    env = make_env("reach", seed=3)
    obs, _ = env.reset(seed=3)
    chunk_policy = LearnedPolicy(policy)
    plan = chunk_policy.planner(env, lambda step: None, 1)
    images = {chunk_policy.camera: obs["image"]}
    state = np.asarray(obs["state"], np.float32)
    for future in (None, state + np.float32(0.5)):  # also a future state it has not seen
        infer = Infer(request_id=1, step_index=0, capture_time_ns=0, prompt=env.instruction, images=images,
                      state=state, future_state=future, delay_steps=0 if future is None else 4, seed=0)  # fmt: skip
        result = plan(infer)
        assert result.actions.shape == (policy.config.action_horizon, 2) and np.isfinite(result.actions).all()
        planning = state if future is None else future
        assert np.abs(result.actions[0] - planning).max() < 0.3  # the chunk starts where it was told the arm is
