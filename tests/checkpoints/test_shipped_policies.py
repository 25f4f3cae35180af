"""The policies shipped in checkpoints/ load and act: the augmented default of the demo and the baseline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robot_io.sim import make_env
from vlash.eval.policies import ModelPolicy
from vlash.eval.requests import PlanRequest
from vlash.policies.policy_dir import load_policy
from vlash.policies.shipped import shipped_policy_dir

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
    runner = ModelPolicy(policy)
    for state in (obs["state"], obs["state"] + np.float32(0.5)):  # also a future state it has not seen
        result = runner.plan(PlanRequest(image=obs["image"], state=state, instruction=env.instruction, seed=0))
        assert result.actions.shape == (policy.config.action_horizon, 2) and np.isfinite(result.actions).all()
        assert np.abs(result.actions[0] - state).max() < 0.3  # the chunk starts where it was told the arm is
