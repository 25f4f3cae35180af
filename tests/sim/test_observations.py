"""SimSettings.observe: the extras after the interface's state entries, their names, values, noise and latency."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vlash.sim import DisturbanceConfig, SimConfigError, load_sim_settings, make_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "eval"
JOINTS = ["joint0", "joint1"]
VELOCITIES = ["joint0_velocity", "joint1_velocity"]
TARGET = ["target_x", "target_y", "target_vx", "target_vy"]


@pytest.mark.parametrize(
    ("observe", "interface", "names"),
    [
        ((), "position", JOINTS),
        (("joint_velocity",), "velocity", JOINTS + VELOCITIES),
        (("target",), "position", JOINTS + TARGET),
        (("joint_velocity", "target"), "velocity", JOINTS + VELOCITIES + TARGET),
        (("target", "joint_velocity"), "velocity", JOINTS + TARGET + VELOCITIES),  # in the order listed
        (("target",), "ee_delta", ["ee_x", "ee_y", *TARGET]),
    ],
)
def test_the_state_is_the_interfaces_entries_then_the_extras_in_order(observe, interface, names):
    env = make_env("hold", seed=0, observe=observe, action_interface=interface)
    obs, _ = env.reset(seed=1)
    assert env.state_names == names and obs["state"].shape == (len(names),) and obs["state"].dtype == np.float32
    assert env.action_names == names[:2] and env.observation_space["state"].shape == (len(names),)
    plain = make_env("hold", seed=0, action_interface=interface)
    plain_obs, _ = plain.reset(seed=1)
    for _ in range(20):  # the leading entries are what they were without extras
        np.testing.assert_array_equal(obs["state"][:2], plain_obs["state"])
        assert env.observation_space.contains(obs)
        obs, *_ = env.step(env.expert_action())
        plain_obs, *_ = plain.step(plain.expert_action())


def test_the_shipped_observable_configs():
    for name, load in (("velocity-observable", 0.0), ("velocity-load-observable", 0.3)):
        settings = load_sim_settings(CONFIGS / f"{name}.yaml")
        assert settings.observe == ("joint_velocity", "target") and settings.action_interface == "velocity"
        assert settings.disturbance.scale == load and settings.to_dict()["observe"] == ["joint_velocity", "target"]
        assert make_env("intercept", settings=settings).state_names == JOINTS + VELOCITIES + TARGET
    assert "observe" not in load_sim_settings(CONFIGS / "velocity.yaml").to_dict()  # records without extras unchanged


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("observe=[joint_speed]", "observe: unknown observation 'joint_speed'; known: joint_velocity, target"),
        ("observe=target", "observe must be a list of names (joint_velocity, target), got 'target'"),
        ("observe=[target,target]", "observe: 'target' is listed twice"),
    ],
)
def test_a_refused_observation_names_itself(override, message):
    with pytest.raises(SimConfigError) as caught:
        load_sim_settings(None, [override])
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_joint_velocity_is_how_fast_the_joints_move_load_included():
    env = make_env(
        "hold",
        seed=0,
        action_interface="velocity",
        observe=("joint_velocity",),
        disturbance=DisturbanceConfig("load", 0.3),
    )
    obs, _ = env.reset(seed=4)
    assert 0 < np.abs(obs["state"][2:]).max() <= 0.3 + 1e-3  # the drive at rest: the load's bias alone
    for _ in range(40):  # commanded still: the drive stops, the joints drift at the load's bias
        previous = obs["state"]
        obs, *_ = env.step(np.zeros(2, np.float32))
    drift = (obs["state"][:2] - previous[:2]) / env.dt
    assert np.abs(env.arm_state.qd).max() < 1e-9 and np.abs(obs["state"][2:]).max() > 0.02
    # the velocity at both ends of the step averages to the step's motion (within the load's change over a substep)
    np.testing.assert_allclose((previous[2:] + obs["state"][2:]) / 2, drift, atol=0.01)
    moving = make_env("reach", seed=0, observe=("joint_velocity",))
    moving.reset(seed=2)
    for _ in range(8):
        obs, *_ = moving.step(moving.expert_action())
    np.testing.assert_allclose(obs["state"][2:], moving.arm_state.qd, rtol=1e-6)  # no load: the drive's velocity
    assert np.abs(obs["state"][2:]).max() > 0.5


def test_the_target_of_every_task():
    for task in ("reach", "hold", "whack", "track", "intercept"):
        env = make_env(task, seed=0, observe=("target",), image_size=32)
        obs, info = env.reset(seed=3)
        seen = 0
        for _ in range(env.max_steps):
            target = obs["state"][2:]
            if info["target_xy"] is None:
                np.testing.assert_array_equal(target, np.zeros(4))
            else:
                seen += 1
                np.testing.assert_allclose(target[:2], info["target_xy"], atol=1e-6)
                if task in ("reach", "hold", "whack"):
                    np.testing.assert_array_equal(target[2:], [0.0, 0.0])  # static targets
                elif task == "track":  # the path's derivative: a central difference agrees
                    step = env.step_index
                    ahead, behind = env.task.position(env.world, step + 1), env.task.position(env.world, step - 1)
                    np.testing.assert_allclose(target[2:], (ahead - behind) / (2 * env.dt), atol=2e-3)
                else:
                    np.testing.assert_allclose(target[2:], env.world.velocity, rtol=1e-6)
                    assert np.hypot(*target[2:]) >= 1.5  # a flying ball never stands still
            obs, _, terminated, truncated, info = env.step(env.expert_action())
            if terminated or truncated:
                break
        assert seen > 0, task


def test_sensor_noise_and_observation_latency_apply_to_the_extras():
    observe, load = ("joint_velocity", "target"), DisturbanceConfig("load", 0.3)
    plain = make_env("track", seed=0, action_interface="velocity", observe=observe, disturbance=load)
    noisy = make_env("track", seed=0, action_interface="velocity", observe=observe, disturbance=load, sensor_noise=0.01)
    late = make_env("track", seed=0, action_interface="velocity", observe=observe, disturbance=load,
                    observation_latency=2)  # fmt: skip
    states = {
        name: [env.reset(seed=5)[0]["state"]] for name, env in (("plain", plain), ("noisy", noisy), ("late", late))
    }
    for _ in range(30):
        action = plain.expert_action()
        for name, env in (("plain", plain), ("noisy", noisy), ("late", late)):
            states[name].append(env.step(action)[0]["state"])
    plain_s, noisy_s, late_s = (np.array(states[name]) for name in ("plain", "noisy", "late"))
    error = noisy_s - plain_s
    assert np.all(np.abs(error).max(axis=0) > 0) and np.all(np.abs(error).max(axis=0) < 0.06)  # every entry
    assert 0.007 < error.std() < 0.013
    np.testing.assert_array_equal(late_s[2:], plain_s[:-2])  # the whole state, extras too, two steps late
    np.testing.assert_array_equal(late_s[:3], [plain_s[0]] * 3)
