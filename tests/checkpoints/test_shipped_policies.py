"""The policies shipped in checkpoints/ load and act: the reach policies (the demo's augmented default and its
baseline), the hold policies that plan joint velocities under a load, and the intercept policies."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robot_io.protocol import Infer
from vlash import planar_arm
from vlash.eval.policies import LearnedPolicy
from vlash.eval.sweep import check_action_interface, check_state
from vlash.policies.formats.loading import load_policy
from vlash.policies.names.shipped import shipped_policy_dir
from vlash.resources import config_dir
from vlash.sim import make_env
from vlash.sim.oracle import ExpertPlanner
from vlash.sim.settings import load_sim_settings

SHIPPED = {"pi05-tiny-sim": True, "pi05-tiny-sim-baseline": False}  # name -> trained with both augmentations


def load_shipped(name, augmented):
    """The shipped policy `name`, after checking that vlash train wrote it whole, with or without both augmentations."""
    policy = load_policy(shipped_policy_dir(name))
    meta = policy.metadata
    assert meta["trained_by"] == "vlash.train" and meta["complete"] and "vlash train" in meta["command"]
    assert meta["augment"]["future_state"] is augmented and meta["augment"]["prefix_mix"] is augmented
    return policy


@pytest.mark.parametrize(("name", "augmented"), SHIPPED.items())
def test_shipped_policy_loads_and_acts_from_the_state_it_is_given(name, augmented):
    torch.set_num_threads(1)
    policy = load_shipped(name, augmented)
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


def _request(chunk_policy, env, obs) -> Infer:
    """A sync request (d = 0) for the observation `obs` of `env`."""
    return Infer(request_id=1, step_index=0, capture_time_ns=0, prompt=env.instruction,
                 images={chunk_policy.camera: obs["image"]}, state=np.asarray(obs["state"], np.float32),
                 delay_steps=0, seed=0)  # fmt: skip


# name -> trained with both augmentations. Hold under a load (configs/eval/velocity-load-observable.yaml), task-space
# joint velocities, demonstrations executed the way the policy runs (docs/EVALUATION.md, "Hold under a load")
HOLD = {"pi05-tiny-sim-hold-observable": True, "pi05-tiny-sim-hold-observable-baseline": False}


@pytest.mark.parametrize(("name", "augmented"), HOLD.items())
def test_shipped_hold_policy_plans_joint_velocities_from_the_state_its_simulator_observes(name, augmented):
    settings = load_sim_settings(config_dir("eval") / "velocity-load-observable.yaml")
    torch.set_num_threads(1)
    policy = load_shipped(name, augmented)
    env = make_env("hold", seed=3, settings=settings)
    chunk_policy = LearnedPolicy(policy)
    check_action_interface(chunk_policy.action_interface, env.action_interface, name)  # velocity actions
    check_state(chunk_policy.state_names, chunk_policy.state_dims, env.state_names, name)  # velocities, target
    obs, info = env.reset(seed=3)
    actions = chunk_policy.planner(env, lambda step: None, 1)(_request(chunk_policy, env, obs)).actions
    assert actions.shape == (policy.config.action_horizon, 2) and np.isfinite(actions).all()
    assert np.abs(actions).max() < 1.5 * settings.arm.max_velocity  # joint velocities, not positions
    # executed, the chunk's first rows bring the end effector closer to the target (the load pushes it around)
    start = np.linalg.norm(info["ee_xy"] - info["target_xy"])
    for action in actions[:10]:
        _, _, _, _, info = env.step(action)
    assert np.linalg.norm(info["ee_xy"] - info["target_xy"]) < 0.85 * start


# name -> trained with both augmentations. Intercept (configs/eval/velocity-observable.yaml), task-space joint
# velocities, demonstrations executed the way the policy runs (docs/EVALUATION.md, "Intercept")
INTERCEPT = {"pi05-tiny-sim-intercept-observable": True, "pi05-tiny-sim-intercept-observable-baseline": False}


def _end_effector_move(arm, joints, velocities):
    """The end effector's displacement after `velocities` [n, 2] (clipped to the arm's limit) run from `joints`."""
    run = np.clip(velocities, -arm.max_velocity, arm.max_velocity).sum(axis=0) * arm.control_dt
    return planar_arm.forward(joints + run, arm.link_lengths) - planar_arm.forward(joints, arm.link_lengths)


@pytest.mark.parametrize(("name", "augmented"), INTERCEPT.items())
def test_shipped_intercept_policy_turns_the_way_the_expert_does_when_the_ball_appears(name, augmented):
    settings = load_sim_settings(config_dir("eval") / "velocity-observable.yaml")
    torch.set_num_threads(1)
    policy = load_shipped(name, augmented)
    chunk_policy = LearnedPolicy(policy)
    envs = [make_env("intercept", seed=seed, settings=settings) for seed in range(5)]
    check_action_interface(chunk_policy.action_interface, envs[0].action_interface, name)  # velocity actions
    check_state(chunk_policy.state_names, chunk_policy.state_dims, envs[0].state_names, name)  # ball's x, y, v
    agreement = []
    for seed, env in enumerate(envs):
        obs, info = env.reset(seed=seed)
        while info.get("target_xy") is None:  # at rest until the ball appears
            obs, _, _, _, info = env.step(np.zeros(2, np.float32))
        infer = _request(chunk_policy, env, obs)
        actions = chunk_policy.planner(env, lambda step: None, 1)(infer).actions
        assert actions.shape == (policy.config.action_horizon, 2) and np.isfinite(actions).all()
        # the first 10 rows move the end effector the way the expert's plan from the same state does
        joints = infer.state[:2]
        mine = _end_effector_move(settings.arm, joints, actions[:10])
        expert = _end_effector_move(settings.arm, joints, ExpertPlanner(env)(infer)[:10])
        agreement.append(mine @ expert / (np.linalg.norm(mine) * np.linalg.norm(expert)))
    # cosines of the two moves: within 90 degrees on every seed, and close on most (a random direction: mean ~0)
    assert min(agreement) > 0 and np.mean(agreement) > 0.5, np.round(agreement, 2)
