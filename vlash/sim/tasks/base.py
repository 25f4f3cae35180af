"""What every task provides to ArmEnv: world sampling, per-step progress and events, drawing, expert goals.

A task object is stateless (configuration only); everything that changes lives in its `world`, a
small dataclass that the env deep-copies into snapshots. The scripted world (target positions,
paths, pop-up schedules, ball lines) is fully drawn at reset from the episode rng, so it is a
function of the seed and time only; the expert may look at its future, within the visibility
rules each task documents.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.config import ArmConfig
from vlash.sim.planner import PlanLimits

# Saturated, well separated colours (RGB) that targets may take; the instruction names them.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (225, 30, 30),
    "green": (30, 170, 50),
    "blue": (30, 70, 235),
    "yellow": (240, 200, 20),
    "magenta": (200, 40, 200),
    "cyan": (20, 190, 205),
}
BALL_COLOR = (255, 130, 0)

Goal = tuple[np.ndarray, np.ndarray | float]  # (joint goal [J], joint feed-forward velocity [J] or 0.0)
Event = dict[str, Any]


@dataclass(frozen=True)
class DrawItem:
    """A disc the renderer draws on top of the background."""

    xy: np.ndarray  # centre, world units
    radius: float  # world units
    rgb: tuple[int, int, int]  # fill colour
    outline: bool = False  # draw a dark rim (the ball)


def sample_annulus(rng: np.random.Generator, radii: tuple[float, float]) -> np.ndarray:
    """A point uniformly distributed over the annulus radii[0] <= |p| <= radii[1]."""
    r = math.sqrt(rng.uniform(radii[0] ** 2, radii[1] ** 2))
    angle = rng.uniform(-math.pi, math.pi)
    return np.array([r * math.cos(angle), r * math.sin(angle)])


class Task(ABC):
    """Configuration-only task logic; `world` objects carry all episode state."""

    name: str = ""
    config_type: type = object  # the task's config dataclass (ArmEnv builds a default one)
    templates: tuple[str, ...] = ()  # instruction phrasings, "{color}" filled in where present

    def __init__(self, config: Any, arm: ArmConfig, limits: PlanLimits) -> None:
        self.config = config
        self.arm = arm
        self.limits = limits
        self.links = arm.link_lengths

    @property
    def max_steps(self) -> int:
        return int(self.config.max_steps)

    def ik(self, xy: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        return kinematics.inverse(xy, self.links, q_ref, self.limits.joint_limits)

    def instruction(self, rng: np.random.Generator, color: str = "") -> str:
        return self.templates[int(rng.integers(len(self.templates)))].format(color=color)

    @abstractmethod
    def sample(self, rng: np.random.Generator, q_init: np.ndarray) -> Any:
        """Draw a new world for an arm resting at q_init; the world has an `instruction` attribute."""

    @abstractmethod
    def update(self, world: Any, step: int, ee_xy: np.ndarray) -> list[Event]:
        """Advance the world to control step `step` (the arm's end effector is at ee_xy); return its events."""

    @abstractmethod
    def success(self, world: Any) -> bool:
        """Whether the episode counts as solved so far."""

    def terminated(self, world: Any) -> bool:
        """Whether the episode ended (solved or irrecoverably failed) before max_steps."""
        return False

    @abstractmethod
    def target_xy(self, world: Any, step: int) -> np.ndarray | None:
        """The currently relevant target position, or None when nothing is visible."""

    def target_velocity(self, world: Any, step: int) -> np.ndarray:
        """The velocity [2] (world units / s) of the target `target_xy` gives; 0 for a target that does not move."""
        return np.zeros(2)

    @abstractmethod
    def draw_items(self, world: Any, step: int) -> list[DrawItem]:
        """What is visible at `step`."""

    @abstractmethod
    def expert_goal(self, world: Any, visible_step: int, step: int, c: np.ndarray, v: np.ndarray) -> Goal | None:
        """Joint goal of the plan state (c, v) at control step `step`, knowing only what is visible at
        `visible_step`; None holds (brakes to rest)."""

    def initial_events(self, world: Any) -> list[Event]:
        """Events of step 0 (targets visible at reset)."""
        return []

    def metrics(self, world: Any) -> dict[str, Any]:
        """Task-specific numbers added to `info` every step."""
        return {}
