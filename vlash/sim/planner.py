"""The scripted expert's motion law: a velocity- and acceleration-limited approach to a joint-space goal.

The plan state is (command c, command velocity v). Each control step the desired velocity is the
goal's own velocity plus a feedback term that is linear near the goal and never faster than what
can still be braked at `brake` (sqrt(2 * brake * |error|)); the command velocity may change by at
most `acceleration * dt` per step and never exceeds `velocity`. Plans are thus smooth (bounded
acceleration), feasible for the servo (margins in PlannerConfig), and time-consistent: replanning
from a planned (c, v) reproduces the rest of the plan, which makes open-loop chunks equal the
closed-loop expert. Everything here is batched over leading axes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.config import ArmConfig, PlannerConfig


@dataclass(frozen=True)
class PlanLimits:
    """Absolute limits of the expert's plans, derived from ArmConfig and PlannerConfig."""

    velocity: float  # [rad/s]
    acceleration: float  # [rad/s^2]
    brake: float  # [rad/s^2]
    gain: float  # [1/s]
    dt: float  # control period [s]
    joint_limits: np.ndarray  # [J, 2]

    @classmethod
    def from_configs(cls, arm: ArmConfig, planner: PlannerConfig) -> PlanLimits:
        return cls(
            velocity=planner.velocity_fraction * arm.max_velocity,
            acceleration=planner.acceleration_fraction * arm.max_acceleration,
            brake=planner.brake_fraction * arm.max_acceleration,
            gain=min(planner.gain, 0.9 / arm.control_dt),
            dt=arm.control_dt,
            joint_limits=np.asarray(arm.joint_limits, dtype=np.float64),
        )


def plan_step(
    c: np.ndarray, v: np.ndarray, q_goal: np.ndarray, v_goal: np.ndarray | float, lim: PlanLimits
) -> tuple[np.ndarray, np.ndarray]:
    """One control step of the plan: returns the next (command, command velocity)."""
    error = q_goal - c
    size = np.abs(error)
    feedback = np.sign(error) * np.minimum(lim.gain * size, np.sqrt(2.0 * lim.brake * size))
    v_des = np.minimum(np.maximum(v_goal + feedback, -lim.velocity), lim.velocity)
    dv = lim.acceleration * lim.dt
    v_new = v + np.minimum(np.maximum(v_des - v, -dv), dv)
    c_new = c + v_new * lim.dt
    low, high = lim.joint_limits[:, 0], lim.joint_limits[:, 1]
    stuck = (c_new < low) | (c_new > high)
    if stuck.any():
        return np.minimum(np.maximum(c_new, low), high), np.where(stuck, 0.0, v_new)
    return c_new, v_new


def travel_time(c: np.ndarray, v: np.ndarray, q_goal: np.ndarray, lim: PlanLimits) -> np.ndarray:
    """Analytic estimate of the time [s] the plan needs from (c, v) to rest at q_goal (max over joints).

    Per joint: stop first if moving away, accelerate at `acceleration`, cruise at `velocity`, brake
    at `brake`; plus a short constant for the linear final approach.
    """
    a, b, vmax = lim.acceleration, lim.brake, lim.velocity
    delta = q_goal - c
    sign = np.where(delta < 0, -1.0, 1.0)
    dist, v0 = np.abs(delta), v * sign
    away = np.maximum(-v0, 0.0)
    t_stop = away / a
    dist = dist + away * away / (2 * a)
    v0 = np.maximum(v0, 0.0)
    # Peak speed of an accelerate-then-brake profile covering `dist` (clipped to vmax).
    peak = np.sqrt(np.maximum((dist + v0 * v0 / (2 * a)) / (1 / (2 * a) + 1 / (2 * b)), 0.0))
    peak = np.maximum(np.minimum(peak, vmax), v0)
    covered = (peak * peak - v0 * v0) / (2 * a) + peak * peak / (2 * b)
    cruise = np.maximum(dist - covered, 0.0) / np.maximum(peak, 1e-6)
    t = t_stop + (peak - v0) / a + cruise + peak / b + 0.5 / lim.gain
    return t.max(axis=-1)


def steps_to_reach(
    c: np.ndarray,
    q_goal: np.ndarray,
    goal_xy: np.ndarray,
    radius: float,
    links: tuple[float, float],
    lim: PlanLimits,
    max_steps: int = 300,
) -> int:
    """Control steps until a plan from rest at c brings the end effector within `radius` of goal_xy."""
    v = np.zeros_like(c)
    for step in range(1, max_steps + 1):
        c, v = plan_step(c, v, q_goal, 0.0, lim)
        if np.hypot(*(kinematics.forward(c, links) - goal_xy)) <= radius:
            return step
    return max_steps
