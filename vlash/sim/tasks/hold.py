"""hold: reach the named target and keep the end effector on it (reach-and-hold).

The layout, colours and expert are reach's (other targets, if any, are distractors that do not end the
episode). Success: the end effector stays within hold_radius of the named target for hold_steps consecutive
control steps; the episode then terminates. Leaving the radius restarts the count. Under an unmodelled
load (vlash.sim.disturbance) holding needs feedback: an open-loop plan drifts off the target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlash.sim.config import check_int, check_positive, check_range
from vlash.sim.errors import SimConfigError
from vlash.sim.tasks.base import COLORS, Event
from vlash.sim.tasks.reach import ReachTask, ReachWorld


@dataclass(frozen=True)
class HoldConfig:
    """Episode parameters of `hold`."""

    num_targets: int = 1  # coloured targets on the table, one of them named by the instruction
    hold_radius: float = 0.06  # the end effector holds while within this distance of the named target's centre
    hold_steps: int = 30  # consecutive control steps to hold (1 s at 30 Hz)
    target_radius: float = 0.07  # drawn radius of a target
    radii: tuple[float, float] = (0.3, 0.85)  # targets lie in this annulus around the base
    min_separation: float = 0.3  # between targets, and from the end effector at reset
    path_clearance: float = 0.04  # the expert's path from reset passes other targets by hold_radius + this
    max_steps: int = 150  # episode length (5 s at 30 Hz); the closed-loop expert needs <= 66 (README)
    max_tries: int = 200  # rejection-sampling attempts for a layout

    def __post_init__(self) -> None:
        check_int("HoldConfig", "num_targets", self.num_targets, 1)
        if self.num_targets > len(COLORS):
            raise SimConfigError(f"HoldConfig.num_targets must be <= {len(COLORS)} colours, got {self.num_targets}")
        for name in ("hold_radius", "target_radius", "min_separation", "path_clearance"):
            check_positive("HoldConfig", name, getattr(self, name))
        check_int("HoldConfig", "hold_steps", self.hold_steps, 1)
        check_range("HoldConfig", "radii", self.radii, 0.0, 1.0)
        check_int("HoldConfig", "max_steps", self.max_steps, 1)
        if self.hold_steps > self.max_steps:
            raise SimConfigError(f"HoldConfig.hold_steps {self.hold_steps} must be <= max_steps {self.max_steps}")
        check_int("HoldConfig", "max_tries", self.max_tries, 1)

    @property
    def touch_radius(self) -> float:
        """reach's name for the radius its layout and path checks use."""
        return self.hold_radius


@dataclass
class HoldWorld(ReachWorld):
    held: int = 0  # consecutive steps the end effector has been within hold_radius of the named target
    entered: bool = False  # whether it has entered the radius at all ("touch" event)
    done: bool = False  # the hold is complete (success)


class HoldTask(ReachTask):
    """Success: within hold_radius of the named target for hold_steps consecutive control steps."""

    name = "hold"
    config_type = HoldConfig
    templates = (
        "reach the {color} target and hold it",
        "move to the {color} dot and stay there",
        "hold the arm on the {color} target",
    )

    def sample(self, rng: np.random.Generator, q_init: np.ndarray) -> HoldWorld:
        reach = super().sample(rng, q_init)
        return HoldWorld(reach.positions, reach.colors, reach.goal, reach.instruction)

    def update(self, world: HoldWorld, step: int, ee_xy: np.ndarray) -> list[Event]:
        if world.done:
            return []
        xy = world.positions[world.goal]
        inside = float(np.hypot(*(ee_xy - xy))) <= self.config.hold_radius
        world.held = world.held + 1 if inside else 0
        events: list[Event] = []
        if inside and not world.entered:
            world.entered = True
            events.append({"kind": "touch", "step": step, "id": world.goal, "xy": xy.tolist(), "correct": True})
        if world.held >= self.config.hold_steps:
            world.done = True
            events.append({"kind": "hold", "step": step, "id": world.goal, "xy": xy.tolist(), "held_steps": world.held})
        return events

    def success(self, world: HoldWorld) -> bool:
        return world.done

    def terminated(self, world: HoldWorld) -> bool:
        return world.done

    def metrics(self, world: HoldWorld) -> dict[str, int]:
        return {"held_steps": world.held}
