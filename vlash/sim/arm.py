"""The arm's servo: tracks absolute joint-position commands under velocity and acceleration limits.

Each control step the new command is linearly interpolated from the previous one over the period
(as robot drivers do) and fed forward as a velocity; a P term on the tracking error, bounded so the
arm can still brake in time, pulls the arm onto the interpolated reference. The resulting joint
velocity is clipped to `max_velocity` and may change by at most `max_acceleration` per second. A
feasible, smooth command sequence is therefore tracked within ~0.01 rad, while a big jump of the
command costs the time a trapezoidal velocity profile needs (e.g. 2 rad: ~0.8 s at 3 rad/s, 25 rad/s^2).

`step_velocity` drives the same arm from joint-velocity commands instead (no position loop): the joint
velocity approaches the command under the same acceleration limit. Both take an optional joint-velocity
bias per substep (an unmodelled load, vlash.sim.disturbance) that adds to the velocity the joint moves
at but is not part of `ArmState.qd`, the drive's own velocity: the position servo's P term rejects it, a
velocity command integrates it into drift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vlash.sim.config import ArmConfig


@dataclass
class ArmState:
    """Measured joint positions/velocities and the last two commands (all float64 [J])."""

    q: np.ndarray  # joint positions [rad]
    qd: np.ndarray  # joint velocities of the drive [rad/s] (a load's bias comes on top, see the module doc)
    command: np.ndarray  # last commanded joint targets (= q at reset)
    previous_command: np.ndarray  # the command before that (commanded velocity = difference / dt)
    ee_target: np.ndarray | None = None  # end-effector actions only: the target increments add to [2]

    @classmethod
    def at_rest(cls, q: np.ndarray) -> ArmState:
        q = np.asarray(q, dtype=np.float64).copy()
        return cls(q=q, qd=np.zeros_like(q), command=q.copy(), previous_command=q.copy())

    def copy(self) -> ArmState:
        target = None if self.ee_target is None else self.ee_target.copy()
        return ArmState(self.q.copy(), self.qd.copy(), self.command.copy(), self.previous_command.copy(), target)


class Servo:
    """Integrates ArmState over one control period for a new command (deterministic, allocation-light)."""

    def __init__(self, config: ArmConfig) -> None:
        self.config = config
        self.limits = np.asarray(config.joint_limits, dtype=np.float64)
        self._h = config.control_dt / config.substeps
        self._brake = 0.8 * config.max_acceleration
        self._low, self._high = self.limits[:, 0].tolist(), self.limits[:, 1].tolist()

    def clip_command(self, command: np.ndarray) -> np.ndarray:
        return np.clip(command, self.limits[:, 0], self.limits[:, 1])

    def step(self, state: ArmState, command: np.ndarray, bias: list[list[float]] | None = None) -> None:
        """Advance `state` in place by one control period towards `command` (already within limits);
        `bias[i][j]` is joint i's velocity bias during substep j (None: no load)."""
        q, qd = state.q.tolist(), state.qd.tolist()
        for i, (start, target) in enumerate(zip(state.command.tolist(), command.tolist(), strict=True)):
            q[i], qd[i] = self._joint(i, q[i], qd[i], start, target, None if bias is None else bias[i])
        state.q, state.qd = np.array(q), np.array(qd)
        state.previous_command, state.command = state.command, np.array(command, dtype=np.float64)

    def step_velocity(self, state: ArmState, velocity: np.ndarray, bias: list[list[float]] | None = None) -> None:
        """Advance `state` in place by one control period under joint-velocity command `velocity` (already within
        +-max_velocity). A velocity arm has no position command: `command` follows the measured position."""
        cfg, h = self.config, self._h
        dv_max = cfg.max_acceleration * h
        q, qd = state.q.tolist(), state.qd.tolist()
        for i, v_des in enumerate(velocity.tolist()):
            low, high, load = self._low[i], self._high[i], [0.0] * cfg.substeps if bias is None else bias[i]
            for b in load:
                qd[i] += min(max(v_des - qd[i], -dv_max), dv_max)
                q[i] += (qd[i] + b) * h
                if q[i] > high:
                    q[i], qd[i] = high, min(qd[i], 0.0)
                elif q[i] < low:
                    q[i], qd[i] = low, max(qd[i], 0.0)
        state.q, state.qd = np.array(q), np.array(qd)
        state.previous_command, state.command = state.command, state.q.copy()

    def _joint(
        self, i: int, q: float, qd: float, start: float, target: float, bias: list[float] | None
    ) -> tuple[float, float]:
        """One joint over one control period (plain floats: ~20x faster than numpy on 2-vectors)."""
        cfg, h, n = self.config, self._h, self.config.substeps
        low, high = self._low[i], self._high[i]
        vmax, dv_max, gain, brake2 = cfg.max_velocity, cfg.max_acceleration * h, cfg.tracking_gain, 2 * self._brake
        feed_forward = (target - start) / cfg.control_dt
        for j in range(1, n + 1):
            error = start + (target - start) * (j / n) - q
            size = abs(error)
            feedback = math.copysign(min(gain * size, math.sqrt(brake2 * size)), error)
            v_des = min(max(feed_forward + feedback, -vmax), vmax)
            qd += min(max(v_des - qd, -dv_max), dv_max)
            q += qd * h if bias is None else (qd + bias[j - 1]) * h
            if q > high:
                q, qd = high, min(qd, 0.0)
            elif q < low:
                q, qd = low, max(qd, 0.0)
        return q, qd
