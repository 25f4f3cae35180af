"""Kinematics round trips and the servo's velocity/acceleration limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vlash import planar_arm as kin
from vlash.sim import (
    ArmConfig,
    ArmState,
    InterceptConfig,
    PlannerConfig,
    ReachConfig,
    SimConfigError,
    TrackConfig,
    WhackConfig,
)
from vlash.sim.arm import Servo

LINKS = (0.5, 0.4)
LIMITS = np.array([[-2 * math.pi, 2 * math.pi], [-2.8, 2.8]])


def test_ik_round_trip_on_both_branches_and_keeps_the_branch():
    rng = np.random.default_rng(0)
    r = rng.uniform(0.25, 0.88, 500)
    a = rng.uniform(-math.pi, math.pi, 500)
    xy = np.stack([r * np.cos(a), r * np.sin(a)], axis=-1)
    for sign in (1.0, -1.0):
        ref = np.stack([rng.uniform(-3, 3, 500), sign * rng.uniform(0.1, 2.5, 500)], axis=-1)
        q = kin.inverse(xy, LINKS, ref, LIMITS)
        np.testing.assert_allclose(kin.forward(q, LINKS), xy, atol=1e-9)
        assert np.all(np.sign(q[:, 1]) == sign)
        assert np.all(np.abs(q[:, 0] - ref[:, 0]) <= math.pi + 1e-9)  # nearest 2*pi-equivalent of joint 0
        assert np.all(np.abs(q[:, 0]) <= 2 * math.pi)
        single = np.array([kin.inverse(p, LINKS, q_ref, LIMITS) for p, q_ref in zip(xy[:20], ref[:20], strict=True)])
        np.testing.assert_allclose(single, q[:20], atol=1e-12)


def test_ik_keeps_joint_0_within_its_limits():
    # The nearest equivalent of ~0 to a reference of -4.8 would be -2*pi - 0.01: out of limits, so ~0.
    q = kin.inverse(np.array([0.5, -0.01]), LINKS, np.array([-4.8 - math.pi, 0.0]), LIMITS)
    assert -2 * math.pi <= q[0] <= 2 * math.pi
    np.testing.assert_allclose(kin.forward(q, LINKS), [0.5, -0.01], atol=1e-9)


def test_ik_projects_unreachable_points_onto_the_workspace():
    q = kin.inverse(np.array([2.0, 0.0]), LINKS, np.array([0.0, 0.5]), LIMITS)
    np.testing.assert_allclose(kin.forward(q, LINKS), [0.9, 0.0], atol=1e-6)


def test_servo_tracks_a_jump_within_velocity_and_acceleration_limits():
    cfg = ArmConfig()
    servo = Servo(cfg)
    state = ArmState.at_rest(np.zeros(2))
    target = np.array([2.0, -1.0])
    qs, qds = [state.q.copy()], [state.qd.copy()]
    for _ in range(45):
        servo.step(state, target)
        qs.append(state.q.copy())
        qds.append(state.qd.copy())
    qs, qds = np.array(qs), np.array(qds)
    assert np.abs(qds).max() <= cfg.max_velocity + 1e-9
    # Per control step the velocity changes by at most max_acceleration * dt.
    assert np.abs(np.diff(qds, axis=0)).max() <= cfg.max_acceleration * cfg.control_dt + 1e-9
    # A trapezoid at 3 rad/s and 25 rad/s^2 needs 2/3 + 3/25 = 0.79 s (~24 steps) for 2 rad: not faster.
    arrival = int(np.argmax(np.abs(qs[:, 0] - 2.0) < 0.02))
    assert 22 <= arrival <= 30, arrival
    assert np.abs(qs[15, 0] - 2.0) > 0.3
    np.testing.assert_allclose(qs[-1], target, atol=2e-3)


def test_servo_follows_a_smooth_feasible_command_closely():
    cfg = ArmConfig()
    servo = Servo(cfg)
    state = ArmState.at_rest(np.zeros(2))
    t = np.arange(1, 91) * cfg.control_dt
    commands = np.stack([0.6 * np.sin(2.0 * t), 0.4 * (1 - np.cos(3.0 * t))], axis=-1)
    errors = []
    for command in commands:
        servo.step(state, command)
        errors.append(np.abs(state.q - command).max())
    assert max(errors) < 0.03


def test_arm_config_validation_names_the_bad_value():
    with pytest.raises(SimConfigError, match="max_velocity.*-1"):
        ArmConfig(max_velocity=-1.0)
    with pytest.raises(SimConfigError, match="link_lengths"):
        ArmConfig(link_lengths=(0.8, 0.5))
    with pytest.raises(SimConfigError, match="tracking_gain 500"):
        ArmConfig(tracking_gain=500.0)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: ReachConfig(num_targets=9), "num_targets must be <= 6 colours, got 9"),
        (lambda: TrackConfig(settle_steps=500), "settle_steps 500"),
        (lambda: WhackConfig(budget_steps=(9, 2)), r"budget_steps .*\(9, 2\)"),
        (lambda: WhackConfig(success_fraction=1.5), "success_fraction .*1.5"),
        (lambda: InterceptConfig(speed=(0.0, 1.0)), "speed"),
        (lambda: PlannerConfig(brake_fraction=0.95), "brake_fraction 0.95"),
    ],
)
def test_task_configs_reject_bad_values_by_name(factory, message):
    with pytest.raises(SimConfigError, match=message):
        factory()
