"""Configuration of the simulated planar arm and of the scripted expert's planner."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vlash.sim.errors import SimConfigError


def check_positive(owner: str, name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise SimConfigError(f"{owner}.{name} must be a positive finite number, got {value!r}")


def check_fraction(owner: str, name: str, value: float) -> None:
    if not (isinstance(value, int | float) and 0 < value <= 1):
        raise SimConfigError(f"{owner}.{name} must be in (0, 1], got {value!r}")


def check_range(owner: str, name: str, value: tuple[float, float], low: float, high: float) -> None:
    """Raise SimConfigError unless value is a pair with low <= value[0] <= value[1] <= high."""
    if not (len(value) == 2 and low <= value[0] <= value[1] <= high):
        raise SimConfigError(f"{owner}.{name} must be a pair within [{low}, {high}] in order, got {value!r}")


def check_int(owner: str, name: str, value: int, low: int) -> None:
    if not (isinstance(value, int) and value >= low):
        raise SimConfigError(f"{owner}.{name} must be an int >= {low}, got {value!r}")


@dataclass(frozen=True)
class ArmConfig:
    """A 2-joint planar arm, base at the world origin; the camera sees the square [-1, 1]^2."""

    link_lengths: tuple[float, float] = (0.5, 0.4)  # shoulder->elbow, elbow->end effector (world units)
    joint_limits: tuple[tuple[float, float], ...] = ((-2 * math.pi, 2 * math.pi), (-2.8, 2.8))  # [rad] per joint
    max_velocity: float = 3.0  # joint speed limit of the servo [rad/s]
    max_acceleration: float = 25.0  # joint acceleration limit of the servo [rad/s^2]
    tracking_gain: float = 30.0  # P gain of the position servo on top of the command's feed-forward [1/s]
    control_dt: float = 1.0 / 30.0  # control period: one env.step [s]
    substeps: int = 4  # physics integration sub-steps per control step

    def __post_init__(self) -> None:
        if len(self.link_lengths) != 2:
            raise SimConfigError(f"ArmConfig.link_lengths must hold 2 lengths, got {self.link_lengths!r}")
        for length in self.link_lengths:
            check_positive("ArmConfig", "link_lengths", length)
        if sum(self.link_lengths) > 1.0:
            raise SimConfigError(f"ArmConfig.link_lengths must sum to <= 1 (the view), got {self.link_lengths!r}")
        if len(self.joint_limits) != 2 or any(len(lim) != 2 or not lim[0] < lim[1] for lim in self.joint_limits):
            raise SimConfigError(f"ArmConfig.joint_limits must be 2 pairs (low < high), got {self.joint_limits!r}")
        for name in ("max_velocity", "max_acceleration", "tracking_gain", "control_dt"):
            check_positive("ArmConfig", name, getattr(self, name))
        if not (isinstance(self.substeps, int) and self.substeps >= 1):
            raise SimConfigError(f"ArmConfig.substeps must be an int >= 1, got {self.substeps!r}")
        if self.tracking_gain * self.control_dt / self.substeps >= 1.0:
            raise SimConfigError(
                f"ArmConfig.tracking_gain {self.tracking_gain} is unstable with {self.substeps} substeps "
                f"of {self.control_dt / self.substeps:.4f} s (need gain * substep < 1)"
            )

    @property
    def num_joints(self) -> int:
        return len(self.link_lengths)

    @property
    def reach(self) -> float:
        return float(sum(self.link_lengths))


@dataclass(frozen=True)
class PlannerConfig:
    """How hard the scripted expert drives the arm, as fractions of the servo's limits (margins keep it trackable)."""

    velocity_fraction: float = 0.9  # planned joint speed <= this * ArmConfig.max_velocity
    acceleration_fraction: float = 0.85  # planned joint acceleration <= this * ArmConfig.max_acceleration
    brake_fraction: float = 0.45  # deceleration assumed when approaching a goal, * ArmConfig.max_acceleration
    gain: float = 10.0  # final-approach P gain [1/s] (must satisfy gain * control_dt < 1)

    def __post_init__(self) -> None:
        for name in ("velocity_fraction", "acceleration_fraction", "brake_fraction"):
            check_fraction("PlannerConfig", name, getattr(self, name))
        check_positive("PlannerConfig", "gain", self.gain)
        if self.brake_fraction > self.acceleration_fraction:
            raise SimConfigError(
                f"PlannerConfig.brake_fraction {self.brake_fraction} must not exceed "
                f"acceleration_fraction {self.acceleration_fraction}"
            )
