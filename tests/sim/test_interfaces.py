"""Action interfaces: velocity and end-effector increments, their spaces, physics and the expert in each."""

from __future__ import annotations

import numpy as np
import pytest

from vlash import planar_arm as kin
from vlash.sim import ACTION_KIND, INTERFACES, TASKS, make_env
from vlash.sim.rollout import run_expert_episode

LINKS = (0.5, 0.4)


def test_each_interface_names_its_state_kind_and_spaces():
    expected = {
        "position": (["joint0", "joint1"], "absolute", 2.8),
        "velocity": (["joint0", "joint1"], "velocity", 3.0),
        "ee_delta": (["ee_x", "ee_y"], "delta", 0.13),
    }
    assert set(INTERFACES) == set(expected) and {k: v[1] for k, v in expected.items()} == ACTION_KIND
    for interface, (names, kind, high) in expected.items():
        env = make_env("reach", action_interface=interface)
        obs, _ = env.reset(seed=2)
        assert env.action_interface == interface and env.state_names == names and env.action_kind == kind
        assert env.action_space.high[1] == pytest.approx(high) and env.observation_space.contains(obs)
    ee = make_env("reach", action_interface="ee_delta")
    obs, info = ee.reset(seed=2)
    np.testing.assert_allclose(obs["state"], info["ee_xy"], atol=1e-6)  # the state is the end effector


def test_velocity_commands_accelerate_within_the_limit_clip_and_stop_at_joint_limits():
    env = make_env("reach", action_interface="velocity")
    env.reset(seed=0)
    q0 = env.arm_state.q.copy()
    _, _, _, _, info = env.step(np.array([2.0, -1.0], np.float32))
    assert not info["action_clipped"]
    # one period at 25 rad/s^2 from rest: 4 substeps of +0.208 rad/s reach 0.83 rad/s, not the commanded 2
    np.testing.assert_allclose(env.arm_state.qd, [25 / 30, -25 / 30], atol=1e-9)
    for _ in range(5):
        env.step(np.array([2.0, -1.0], np.float32))
    np.testing.assert_allclose(env.arm_state.qd, [2.0, -1.0], atol=1e-9)  # then it holds the command
    moved = env.arm_state.q - q0
    assert 0 < moved[0] < 6 * 2.0 / 30 and -6 * 1.0 / 30 < moved[1] < 0
    _, _, _, _, info = env.step(np.array([9.0, 0.0], np.float32))
    assert info["action_clipped"] and env.arm_state.qd[0] <= 3.0 + 1e-9
    for _ in range(60):  # the elbow runs into its limit and stays there
        env.step(np.array([0.0, 3.0], np.float32))
    assert env.arm_state.q[1] == pytest.approx(2.8) and env.arm_state.qd[1] == 0.0


def test_ee_increments_move_the_end_effector_on_the_elbow_branch_and_clip_at_the_workspace():
    env = make_env("reach", action_interface="ee_delta")
    obs, _ = env.reset(seed=5)
    start, elbow_sign = obs["state"].astype(np.float64), np.sign(env.arm_state.q[1])
    step = np.array([0.01, -0.005])
    for _ in range(20):
        obs, _, terminated, _, info = env.step(step.astype(np.float32))
        assert not info["action_clipped"] and np.sign(env.arm_state.q[1]) == elbow_sign
        if terminated:
            break
    target = env.arm_state.ee_target
    np.testing.assert_allclose(target, start + env.step_index * step, atol=1e-6)
    assert np.hypot(*(obs["state"] - target)) < 0.02  # the servo follows the IK of the target closely
    _, _, _, _, info = env.step(np.array([0.5, 0.0], np.float32))  # beyond the per-step bound: clipped
    assert info["action_clipped"]


def test_ee_target_stays_reachable():
    env = make_env("track", action_interface="ee_delta")
    env.reset(seed=1)
    clipped = False
    for _ in range(40):  # push outwards along the end effector's direction, far past the reach
        direction = env.arm_state.ee_target / np.hypot(*env.arm_state.ee_target)
        clipped |= env.step((0.1 * direction).astype(np.float32))[4]["action_clipped"]
    assert clipped and np.hypot(*env.arm_state.ee_target) == pytest.approx(0.9)
    assert np.hypot(*env.step(np.zeros(2, np.float32))[4]["ee_xy"]) == pytest.approx(0.9, abs=0.01)


@pytest.mark.parametrize("given", [False, True])
def test_the_expert_plans_the_same_motion_in_every_interface(given):
    """One plan, three readings: the targets c_i, (c_i - c_{i-1}) / dt, fk(c_i) - fk(c_{i-1}), from the same
    planning state (the defaults at rest: all three are the reset position; or a given state and velocity)."""
    envs = {name: make_env("reach", action_interface=name) for name in INTERFACES}
    for env in envs.values():
        env.reset(seed=3)
    q = envs["position"].arm_state.q + (np.array([0.2, -0.1]) if given else 0.0)
    kwargs = {"start_offset": 2, "velocity": np.array([0.5, -0.3])} if given else {}
    state = {"position": q, "velocity": q, "ee_delta": kin.forward(q, LINKS)} if given else {}
    chunks = {name: env.expert_chunk(30, state=state.get(name), **kwargs) for name, env in envs.items()}
    positions, dt = chunks["position"], envs["velocity"].dt
    np.testing.assert_allclose(q + np.cumsum(chunks["velocity"] * dt, axis=0), positions, atol=1e-5)
    reached = kin.forward(q, LINKS) + np.cumsum(chunks["ee_delta"], axis=0)
    np.testing.assert_allclose(reached, kin.forward(positions, LINKS), atol=1e-5)
    assert np.abs(positions[-1] - q).max() > 0.2  # it really moves


@pytest.mark.parametrize("interface", ["velocity", "ee_delta"])
@pytest.mark.parametrize("task", TASKS)
def test_closed_loop_expert_solves_each_task_in_each_interface(task, interface):
    env = make_env(task, image_size=16, action_interface=interface)
    results = [run_expert_episode(env, seed) for seed in range(20)]
    assert np.mean([r.success for r in results]) >= 0.95, (task, interface)
    low, high = env.action_space.low, env.action_space.high
    assert all(np.all((r.actions >= low) & (r.actions <= high)) for r in results)  # never clipped


@pytest.mark.filterwarnings("ignore:.*symmetric and normalized")
@pytest.mark.parametrize("interface", ["velocity", "ee_delta"])
def test_gymnasium_env_checker_in_each_interface(interface):
    from gymnasium.utils.env_checker import check_env

    check_env(make_env("hold", action_interface=interface), skip_render_check=True)
