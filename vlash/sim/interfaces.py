"""Action interfaces of ArmEnv: what an action means, what the observed "state" is, how the expert's plan reads.

| interface | action | observed state | ACTION_KIND |
|---|---|---|---|
| position | absolute joint targets [J] (rad) for the position servo | joint positions [J] | absolute |
| velocity | joint velocities [J] (rad/s), tracked under the acceleration limit | joint positions [J] | velocity |
| ee_delta | end-effector increments [2] (world units per step) to a target; IK -> servo | EE [x, y] | delta |

The expert always plans joint commands c_0 .. c_{H-1} from a planning position c_{-1}; each interface says how
those read as actions (the targets, (c_i - c_{i-1}) / dt, or fk(c_i) - fk(c_{i-1})) and what planning position
a given state and the default stand for. With every kind, "state + what the actions add" is the future state.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.arm import ArmState, Servo
from vlash.sim.config import ArmConfig
from vlash.sim.errors import SimConfigError

# how a chunk executor treats each interface's actions (vlash.eval and robot_io.executors name the kinds)
ACTION_KIND: dict[str, str] = {"position": "absolute", "velocity": "velocity", "ee_delta": "delta"}
INTERFACES: tuple[str, ...] = tuple(ACTION_KIND)


class ActionInterface:
    """Position interface (the default): absolute joint targets through the position servo; the base of the others."""

    name: ClassVar[str] = "position"

    def __init__(self, arm: ArmConfig, servo: Servo) -> None:
        self.arm, self.servo = arm, servo
        self.links = arm.link_lengths
        self.joint_limits = servo.limits

    @property
    def state_names(self) -> list[str]:
        return [f"joint{i}" for i in range(self.arm.num_joints)]

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.joint_limits[:, 0].astype(np.float32), self.joint_limits[:, 1].astype(np.float32)

    def state_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.joint_limits[:, 0].astype(np.float32), self.joint_limits[:, 1].astype(np.float32)

    def reset(self, state: ArmState) -> None:
        """Set up the interface's part of a freshly reset arm state."""

    def observe(self, state: ArmState) -> np.ndarray:
        """The observed "state" (float32) of the arm, before sensor noise."""
        return state.q.astype(np.float32)

    def apply(self, state: ArmState, action: np.ndarray, bias: list[list[float]] | None) -> bool:
        """Advance `state` by one control period under `action` (validated shape, finite); True if it was clipped."""
        command = self.servo.clip_command(action)
        self.servo.step(state, command, bias)
        return bool(np.any(command != action))

    def plan_start(self, state: ArmState, given: np.ndarray | None) -> np.ndarray:
        """The expert's planning position c_{-1}: the given state (in state units) or the default."""
        return state.command if given is None else given

    def to_actions(self, start: np.ndarray, plan: np.ndarray) -> np.ndarray:
        """The plan c_0 .. c_{H-1} [H, J] from planning position `start`, as actions of this interface."""
        return plan


class VelocityInterface(ActionInterface):
    """Joint velocities; a velocity arm has no position command, so the expert plans from the measured position."""

    name: ClassVar[str] = "velocity"

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        vmax = np.full(self.arm.num_joints, self.arm.max_velocity, dtype=np.float32)
        return -vmax, vmax

    def apply(self, state: ArmState, action: np.ndarray, bias: list[list[float]] | None) -> bool:
        velocity = np.clip(action, -self.arm.max_velocity, self.arm.max_velocity)
        self.servo.step_velocity(state, velocity, bias)
        return bool(np.any(velocity != action))

    def plan_start(self, state: ArmState, given: np.ndarray | None) -> np.ndarray:
        return state.q if given is None else given

    def to_actions(self, start: np.ndarray, plan: np.ndarray) -> np.ndarray:
        return np.diff(np.vstack([start, plan]), axis=0) / self.arm.control_dt


class EEDeltaInterface(ActionInterface):
    """End-effector increments added to a target (reset: the measured EE position), kept within the reachable
    annulus; IK nearest the last joint command (elbow branch kept) gives the servo's joint target."""

    name: ClassVar[str] = "ee_delta"

    def __init__(self, arm: ArmConfig, servo: Servo) -> None:
        super().__init__(arm, servo)
        self.radii = kinematics.radius_range(self.links, float(self.joint_limits[1, 1]))
        # the largest end-effector step at full joint speed: joint 0 swings the whole arm, joint 1 the forearm
        self.max_delta = arm.max_velocity * arm.control_dt * (self.links[0] + 2 * self.links[1])

    @property
    def state_names(self) -> list[str]:
        return ["ee_x", "ee_y"]

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        bound = np.full(2, self.max_delta, dtype=np.float32)
        return -bound, bound

    def state_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        reach = np.full(2, self.arm.reach, dtype=np.float32)
        return -reach, reach

    def reset(self, state: ArmState) -> None:
        state.ee_target = kinematics.forward(state.q, self.links)

    def observe(self, state: ArmState) -> np.ndarray:
        return kinematics.forward(state.q, self.links).astype(np.float32)

    def apply(self, state: ArmState, action: np.ndarray, bias: list[list[float]] | None) -> bool:
        if state.ee_target is None:
            raise SimConfigError("ee_delta: the arm state has no end-effector target (reset with this interface)")
        delta = np.clip(action, -self.max_delta, self.max_delta)
        wanted = state.ee_target + delta
        state.ee_target = self.reachable(wanted)
        command = kinematics.inverse(state.ee_target, self.links, state.command, self.joint_limits)
        command = self.servo.clip_command(command)
        self.servo.step(state, command, bias)
        return bool(np.any(delta != action) or np.any(state.ee_target != wanted))

    def reachable(self, xy: np.ndarray) -> np.ndarray:
        """xy moved radially onto the reachable annulus (unchanged when it is on it already)."""
        r = float(np.hypot(xy[0], xy[1]))
        low, high = self.radii
        if low <= r <= high:
            return xy
        if r == 0.0:
            return np.array([low, 0.0])
        return xy * (min(max(r, low), high) / r)

    def plan_start(self, state: ArmState, given: np.ndarray | None) -> np.ndarray:
        if given is None:
            return state.command  # fk of the last command is the end-effector target
        return kinematics.inverse(given, self.links, state.q, self.joint_limits)

    def to_actions(self, start: np.ndarray, plan: np.ndarray) -> np.ndarray:
        return np.diff(kinematics.forward(np.vstack([start, plan]), self.links), axis=0)


INTERFACE_TYPES: dict[str, type[ActionInterface]] = {
    cls.name: cls for cls in (ActionInterface, VelocityInterface, EEDeltaInterface)
}


def make_interface(name: str, arm: ArmConfig, servo: Servo) -> ActionInterface:
    if name not in INTERFACE_TYPES:
        raise SimConfigError(f"action_interface must be one of {', '.join(INTERFACES)}, got {name!r}")
    return INTERFACE_TYPES[name](arm, servo)
