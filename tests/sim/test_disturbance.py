"""Joint load, sensor noise and observation latency: their shapes, their effects, and that the world stays put."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from vlash.sim import DisturbanceConfig, make_env
from vlash.sim.disturbance import JointBias

LOAD = DisturbanceConfig("load", 0.3)


def test_load_is_smooth_and_peaks_at_its_scale_and_drift_is_constant():
    rng = np.random.default_rng(0)
    for _ in range(5):
        bias = JointBias.sample(LOAD, rng, 2, horizon_s=5.0)
        t = np.linspace(0, 5.0, 5001)
        b = bias.at(t)
        np.testing.assert_allclose(np.abs(b).max(axis=0), [0.3, 0.3], rtol=1e-3)  # per joint
        # slowly varying: the fastest sinusoid (1.5 s) bounds the rate of change by 2 pi / 1.5 * 0.3 * 3 / 1.5
        assert np.abs(np.diff(b, axis=0) / (t[1] - t[0])).max() < 2 * math.pi / 1.5 * 0.3 * 3 / 1.5
        # a load, not a drift: no constant part, and it pushes each joint both ways within the episode
        assert np.all(bias.offset == 0) and ((b > 0).any(axis=0) & (b < 0).any(axis=0)).all()
    drift = JointBias.sample(DisturbanceConfig("drift", 0.2), rng, 2, horizon_s=5.0)
    b = drift.at(np.array([0.0, 1.0, 4.0]))
    assert np.allclose(b, b[0]) and np.hypot(*b[0]) == pytest.approx(0.2)


def test_a_load_drifts_a_still_velocity_arm_while_the_position_servo_holds():
    drift = {}
    for interface in ("velocity", "position"):
        env = make_env("hold", action_interface=interface, disturbance=LOAD)
        env.reset(seed=4)
        q0, still = env.arm_state.q.copy(), (np.zeros(2) if interface == "velocity" else env.arm_state.q)
        errors = []
        for _ in range(30):
            env.step(still.astype(np.float32))
            errors.append(np.abs(env.arm_state.q - q0).max())
        drift[interface] = max(errors)
    assert drift["velocity"] > 0.05 and drift["position"] < 0.02, drift  # 1 s of up to 0.3 rad/s vs P rejection
    env = make_env("hold", action_interface="velocity")
    env.reset(seed=4)
    q0 = env.arm_state.q.copy()
    for _ in range(30):
        env.step(np.zeros(2, np.float32))
    assert np.array_equal(env.arm_state.q, q0)  # without a load nothing moves


@pytest.mark.parametrize(
    "features", [{"disturbance": LOAD}, {"sensor_noise": 0.01}, {"observation_latency": 3}, {"disturbance": LOAD,
                 "sensor_noise": 0.01, "observation_latency": 2, "action_interface": "velocity"}]
)  # fmt: skip
def test_the_world_of_a_seed_does_not_depend_on_the_unmodelled_features(features):
    plain, other = make_env("whack", seed=9), make_env("whack", seed=9, **features)
    for seed in (3, None, None):  # an explicit seed, then the constructor's stream continued
        plain.reset(seed=seed)
        other.reset(seed=seed)
        assert plain.instruction == other.instruction
        np.testing.assert_array_equal(plain.world.positions, other.world.positions)
        np.testing.assert_array_equal(plain.world.appear, other.world.appear)
        np.testing.assert_array_equal(plain.arm_state.q, other.arm_state.q)
        assert plain.np_random.bit_generator.state == other.np_random.bit_generator.state  # streams in step


def test_seedless_resets_draw_a_new_load_each_episode_reproducibly():
    loads = []
    for _ in range(2):
        env = make_env("hold", seed=4, disturbance=LOAD)
        env.reset()  # the constructor's seed
        loads.append([env.snapshot().unmodelled[0]] + [env.reset() and env.snapshot().unmodelled[0] for _ in range(2)])
    for a, b in zip(*loads, strict=True):
        np.testing.assert_array_equal(a.phase, b.phase)  # same constructor seed: same loads
    phases = [load.phase for load in loads[0]]
    assert not np.array_equal(phases[0], phases[1]) and not np.array_equal(phases[1], phases[2])


def test_sensor_noise_has_its_std_is_seeded_and_spares_the_image():
    noisy, exact = make_env("hold", sensor_noise=0.02), make_env("hold")
    errors = []
    for seed in range(3):
        obs, _ = noisy.reset(seed=seed)
        truth, _ = exact.reset(seed=seed)
        assert np.array_equal(obs["image"], truth["image"])
        for _ in range(40):
            action = exact.expert_action()
            obs, *_ = noisy.step(action)
            truth, *_ = exact.step(action)
            errors.append(obs["state"] - truth["state"])
    assert np.std(errors) == pytest.approx(0.02, rel=0.15) and abs(np.mean(errors)) < 0.005
    again = make_env("hold", sensor_noise=0.02)
    assert np.array_equal(again.reset(seed=2)[0]["state"], noisy.reset(seed=2)[0]["state"])
    assert not np.array_equal(again.reset(seed=3)[0]["state"], exact.reset(seed=3)[0]["state"])


def test_observation_latency_returns_old_observations_and_starts_with_the_reset_one():
    late, now = make_env("track", observation_latency=3, render_mode="rgb_array"), make_env("track")
    first_late, _ = late.reset(seed=1)
    first, _ = now.reset(seed=1)
    seen, shown = [first], [first_late]
    for _ in range(10):
        action = now.expert_action()
        seen.append(now.step(action)[0])
        shown.append(late.step(action)[0])
    for k, obs in enumerate(shown):
        expected = seen[max(0, k - 3)]
        assert np.array_equal(obs["image"], expected["image"]) and np.array_equal(obs["state"], expected["state"])
    assert np.array_equal(late.render(), seen[-1]["image"])  # render() shows the present


def test_snapshots_restore_load_noise_and_latency_exactly():
    env = make_env("hold", action_interface="velocity", disturbance=LOAD, sensor_noise=0.01, observation_latency=2)
    env.reset(seed=6)
    for _ in range(12):
        env.step(env.expert_action())
    snap = pickle.loads(pickle.dumps(env.snapshot()))
    runs = []
    for _ in range(2):
        obs = env.restore(snap)
        steps = [obs["state"].copy()]
        for _ in range(15):
            obs, *_ = env.step(env.expert_action())
            steps.append(obs["state"].copy())
        runs.append(np.array(steps))
    np.testing.assert_array_equal(runs[0], runs[1])
    fresh = make_env("hold", action_interface="velocity", disturbance=LOAD, sensor_noise=0.01, observation_latency=2)
    obs = fresh.restore(snap)  # a fresh env of the same settings resumes the same future
    assert np.array_equal(obs["state"], runs[0][0])
    assert np.array_equal(fresh.step(fresh.expert_action())[0]["state"], runs[0][1])
