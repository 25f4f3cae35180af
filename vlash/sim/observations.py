"""What the observed state holds besides the action interface's own entries: the extras `SimSettings.observe` lists.

obs["state"] is the interface's state (joint positions; the end effector's x, y for ee_delta), then each extra in
the order `observe` lists it:

    joint_velocity  joint0_velocity, joint1_velocity: how fast the joints move [rad/s], the drive's velocity plus
                    the load's bias at the observation's time (0 outward at a joint limit)
    target          target_x, target_y, target_vx, target_vy: the task's target in the camera's world frame
                    [world units, world units / s]

The target of each task: reach and hold, the named target (velocity 0); track, the moving target; whack, the
target that is up (velocity 0); intercept, the ball while it flies. While no target is visible (whack between
pop-ups, intercept before the ball appears and once it is caught or gone) all four entries are 0, which no
visible target gives: a static target lies at least 0.3 from the base, a flying ball never stands still.

Why these and not more pixels: a learned velocity policy given one image and the joint positions cannot see what
intercept and hold depend on (the ball's velocity; the load's drift, which shows only in how the joints move). The
Kinetix experiments of RTC and of training-time RTC give their policies symbolic observations too (docs/METHODS.md,
"The observed state"); a second camera with the previous frame would ask the tiny CPU-trained policies to learn
motion from pixel differences.

Sensor noise and observation latency apply to these entries as to the rest of the state (disturbance.py): the
same noise std in each entry's units, clipped to the observation space, and the whole observation delayed.
numpy only (SimRobot names the state's entries before the simulator is loaded).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vlash.sim.arm import ArmState
from vlash.sim.errors import SimConfigError

OBSERVATIONS: tuple[str, ...] = ("joint_velocity", "target")  # the names SimSettings.observe may list
TARGET_NAMES = ("target_x", "target_y", "target_vx", "target_vy")
VIEW = 1.0  # the camera sees the world square [-VIEW, VIEW]^2: a visible target lies within it


def check_observe(value: Any) -> tuple[str, ...]:
    """`value` (a list of observation names) as a tuple; SimConfigError naming an unknown or repeated name."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise SimConfigError(f"observe must be a list of names ({', '.join(OBSERVATIONS)}), got {value!r}")
    names = tuple(value)
    for i, name in enumerate(names):
        if name not in OBSERVATIONS:
            raise SimConfigError(f"observe: unknown observation {name!r}; known: {', '.join(OBSERVATIONS)}")
        if name in names[:i]:
            raise SimConfigError(f"observe: {name!r} is listed twice")
    return names


def extra_names(observe: Sequence[str], num_joints: int) -> list[str]:
    """The state entries the extras add, in order."""
    names: list[str] = []
    for name in observe:
        names += [f"joint{j}_velocity" for j in range(num_joints)] if name == "joint_velocity" else list(TARGET_NAMES)
    return names


class Extras:
    """The extras of one env: their bounds and their values at a control step."""

    def __init__(self, observe: Sequence[str], joint_limits: np.ndarray, max_speed: float) -> None:
        self.observe = check_observe(observe)
        self.limits = np.asarray(joint_limits, np.float64)  # [J, 2]
        self.max_speed = float(max_speed)  # bound of a measured joint velocity: the drive's limit plus the load's peak

    def __bool__(self) -> bool:
        return bool(self.observe)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) float32 of the extras (the target's velocity is unbounded)."""
        joints = len(self.limits)
        low: list[float] = []
        for name in self.observe:
            low += [-self.max_speed] * joints if name == "joint_velocity" else [-VIEW, -VIEW, -np.inf, -np.inf]
        low_array = np.array(low, np.float32)
        return low_array, -low_array

    def values(
        self, arm: ArmState, bias: np.ndarray | None, target: np.ndarray | None, target_velocity: np.ndarray
    ) -> np.ndarray:
        """float64 [E]: the extras of `arm` (moving under the load's `bias` [J] now, None: no load), with the task's
        target at `target` (None: none visible) moving at `target_velocity`."""
        parts = []
        for name in self.observe:
            if name == "joint_velocity":
                velocity = arm.qd if bias is None else arm.qd + bias
                low, high = self.limits[:, 0], self.limits[:, 1]
                stopped = ((arm.q >= high) & (velocity > 0)) | ((arm.q <= low) & (velocity < 0))
                parts.append(np.where(stopped, 0.0, velocity))
            elif target is None:
                parts.append(np.zeros(4))
            else:
                parts.append(np.concatenate([target, target_velocity]))
        return np.concatenate(parts)
