"""reach: touch the named one of a few coloured targets; touching another one fails the episode."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.config import check_int, check_positive, check_range
from vlash.sim.errors import SimConfigError
from vlash.sim.planner import plan_step
from vlash.sim.tasks.base import COLORS, DrawItem, Event, Goal, Task, sample_annulus


@dataclass(frozen=True)
class ReachConfig:
    """Episode parameters of `reach`."""

    num_targets: int = 3  # coloured targets on the table, one of them named by the instruction
    touch_radius: float = 0.06  # end effector within this distance of a target's centre touches it
    target_radius: float = 0.07  # drawn radius of a target
    radii: tuple[float, float] = (0.3, 0.85)  # targets lie in this annulus around the base
    min_separation: float = 0.3  # between targets, and from the end effector at reset
    path_clearance: float = 0.04  # the expert's path from reset passes wrong targets by touch_radius + this
    max_steps: int = 105  # episode length (3.5 s at 30 Hz)
    max_tries: int = 200  # rejection-sampling attempts for a layout

    def __post_init__(self) -> None:
        check_int("ReachConfig", "num_targets", self.num_targets, 1)
        if self.num_targets > len(COLORS):
            raise SimConfigError(f"ReachConfig.num_targets must be <= {len(COLORS)} colours, got {self.num_targets}")
        for name in ("touch_radius", "target_radius", "min_separation", "path_clearance"):
            check_positive("ReachConfig", name, getattr(self, name))
        check_range("ReachConfig", "radii", self.radii, 0.0, 1.0)
        check_int("ReachConfig", "max_steps", self.max_steps, 1)
        check_int("ReachConfig", "max_tries", self.max_tries, 1)


@dataclass
class ReachWorld:
    positions: np.ndarray  # [N, 2] target centres
    colors: list[str]  # colour name of each target
    goal: int  # index of the named target
    instruction: str
    touched: int | None = None  # first target touched (ends the episode)


class ReachTask(Task):
    """Success: the end effector touches the named target before max_steps. Any other target: failure."""

    name = "reach"
    config_type = ReachConfig
    templates = ("touch the {color} target", "reach the {color} dot", "move to the {color} target")

    def sample(self, rng: np.random.Generator, q_init: np.ndarray) -> ReachWorld:
        cfg = self.config
        ee0 = kinematics.forward(q_init, self.links)
        for _ in range(cfg.max_tries):
            positions = self._layout(rng, ee0)
            goal = int(rng.integers(cfg.num_targets))
            if positions is not None and self._path_is_clear(q_init, positions, goal):
                break
        else:
            raise SimConfigError(f"reach: no valid layout in {cfg.max_tries} tries; relax ReachConfig")
        names = list(COLORS)
        colors = [names[i] for i in rng.permutation(len(names))[: cfg.num_targets]]
        return ReachWorld(positions, colors, goal, self.instruction(rng, colors[goal]))

    def _layout(self, rng: np.random.Generator, ee0: np.ndarray) -> np.ndarray | None:
        cfg, points = self.config, []
        for _ in range(50 * cfg.num_targets):
            p = sample_annulus(rng, cfg.radii)
            if all(np.hypot(*(p - o)) >= cfg.min_separation for o in [ee0, *points]):
                points.append(p)
                if len(points) == cfg.num_targets:
                    return np.array(points)
        return None

    def _path_is_clear(self, q_init: np.ndarray, positions: np.ndarray, goal: int) -> bool:
        """Simulate the expert's plan from rest: it must not brush a wrong target on the way."""
        cfg = self.config
        q_goal = self.ik(positions[goal], q_init)
        c, v = q_init.copy(), np.zeros(2)
        others = np.delete(positions, goal, axis=0)
        for _ in range(cfg.max_steps):
            c, v = plan_step(c, v, q_goal, 0.0, self.limits)
            ee = kinematics.forward(c, self.links)
            if np.hypot(*(positions[goal] - ee)) <= cfg.touch_radius:
                return True
            if others.size and np.min(np.hypot(*(others - ee).T)) <= cfg.touch_radius + cfg.path_clearance:
                return False
        return False

    def initial_events(self, world: ReachWorld) -> list[Event]:
        return [
            {"kind": "appear", "step": 0, "id": i, "xy": p.tolist(), "color": world.colors[i]}
            for i, p in enumerate(world.positions)
        ]

    def update(self, world: ReachWorld, step: int, ee_xy: np.ndarray) -> list[Event]:
        if world.touched is not None:
            return []
        dist = np.hypot(*(world.positions - ee_xy).T)
        i = int(np.argmin(dist))
        if dist[i] > self.config.touch_radius:
            return []
        world.touched = i
        xy = world.positions[i].tolist()
        return [{"kind": "touch", "step": step, "id": i, "xy": xy, "correct": i == world.goal}]

    def success(self, world: ReachWorld) -> bool:
        return world.touched == world.goal

    def terminated(self, world: ReachWorld) -> bool:
        return world.touched is not None

    def target_xy(self, world: ReachWorld, step: int) -> np.ndarray | None:
        return world.positions[world.goal].copy()

    def draw_items(self, world: ReachWorld, step: int) -> list[DrawItem]:
        r = self.config.target_radius
        return [DrawItem(p, r, COLORS[c]) for p, c in zip(world.positions, world.colors, strict=True)]

    def expert_goal(self, world: ReachWorld, visible_step: int, step: int, c: np.ndarray, v: np.ndarray) -> Goal:
        return self.ik(world.positions[world.goal], c), 0.0
