"""whack: targets pop up one at a time at scheduled times and places; touch each before its deadline.

Visibility rule (what makes reaction latency measurable): the expert only uses targets that have
appeared at the plan's *visible step* (the env's step_index when the plan is made), never targets
that appear later, even inside the planned horizon. It heads for the most recently appeared
target (and stays on it after touching it).

Deadline calibration: each target's deadline is the expert's own travel time to it (from rest on
the previous target's centre, simulated with the expert's planner) plus a reaction budget drawn
from `budget_steps`. A controller that starts moving `d` steps after the pop-up therefore misses
the targets whose budget is below ~d steps: the hit rate falls measurably with reaction latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vlash import planar_arm as kinematics
from vlash.sim.config import check_fraction, check_int, check_positive, check_range
from vlash.sim.errors import SimConfigError
from vlash.sim.planner import steps_to_reach
from vlash.sim.tasks.base import COLORS, DrawItem, Event, Goal, Task, sample_annulus

PENDING, ACTIVE, HIT, EXPIRED = 0, 1, 2, 3


@dataclass(frozen=True)
class WhackConfig:
    """Episode parameters of `whack`."""

    max_steps: int = 240  # episode length (8 s at 30 Hz); whack always runs to max_steps
    touch_radius: float = 0.06  # end effector within this distance of a target's centre touches it
    target_radius: float = 0.07  # drawn radius
    radii: tuple[float, float] = (0.3, 0.85)  # targets lie in this annulus around the base
    first_appear_steps: tuple[int, int] = (9, 18)  # the first pop-up step is drawn from this range
    gap_steps: tuple[int, int] = (6, 15)  # steps from a deadline to the next pop-up
    budget_steps: tuple[int, int] = (4, 16)  # reaction budget added to the expert's travel time
    min_jump: float = 0.3  # distance between consecutive targets (world units)
    max_travel_steps: int = 18  # the expert reaches each target from the previous one within this
    success_fraction: float = 0.8  # success: at least ceil(this * number of targets) hits

    def __post_init__(self) -> None:
        check_int("WhackConfig", "max_steps", self.max_steps, 1)
        for name in ("touch_radius", "target_radius", "min_jump"):
            check_positive("WhackConfig", name, getattr(self, name))
        check_range("WhackConfig", "radii", self.radii, 0.0, 1.0)
        for name in ("first_appear_steps", "gap_steps", "budget_steps"):
            check_range("WhackConfig", name, getattr(self, name), 0, self.max_steps)
        check_int("WhackConfig", "max_travel_steps", self.max_travel_steps, 1)
        check_fraction("WhackConfig", "success_fraction", self.success_fraction)


@dataclass
class WhackWorld:
    positions: np.ndarray  # [N, 2] target centres
    appear: np.ndarray  # [N] step at which each target pops up
    deadline: np.ndarray  # [N] last step at which a touch counts
    colors: list[str]  # colour name of each target
    instruction: str
    status: np.ndarray  # [N] PENDING / ACTIVE / HIT / EXPIRED
    hit_step: np.ndarray  # [N] step of the touch, -1 if none


class WhackTask(Task):
    """Success: at least ceil(success_fraction * N) of the N scheduled targets touched in time."""

    name = "whack"
    config_type = WhackConfig
    templates = (
        "touch the targets as they appear",
        "tap each target before it disappears",
        "hit every target that pops up",
    )

    def sample(self, rng: np.random.Generator, q_init: np.ndarray) -> WhackWorld:
        cfg = self.config
        rows, q_prev = [], q_init.copy()
        step = int(rng.integers(cfg.first_appear_steps[0], cfg.first_appear_steps[1] + 1))
        while True:
            xy, q, travel = self._next_target(rng, q_prev)
            deadline = step + travel + int(rng.integers(cfg.budget_steps[0], cfg.budget_steps[1] + 1))
            if deadline > cfg.max_steps:
                break
            rows.append((xy, step, deadline))
            q_prev = q
            step = deadline + int(rng.integers(cfg.gap_steps[0], cfg.gap_steps[1] + 1))
        n, names = len(rows), list(COLORS)
        return WhackWorld(
            positions=np.array([r[0] for r in rows]).reshape(n, 2),
            appear=np.array([r[1] for r in rows], dtype=np.int64),
            deadline=np.array([r[2] for r in rows], dtype=np.int64),
            colors=[names[int(i)] for i in rng.integers(len(names), size=n)],
            instruction=self.instruction(rng),
            status=np.full(n, PENDING, dtype=np.int64),
            hit_step=np.full(n, -1, dtype=np.int64),
        )

    def _next_target(self, rng: np.random.Generator, q_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """A target at least min_jump away that the expert reaches from rest at q_prev in time."""
        cfg = self.config
        prev_xy = kinematics.forward(q_prev, self.links)
        for _ in range(10_000):
            xy = sample_annulus(rng, cfg.radii)
            if np.hypot(*(xy - prev_xy)) < cfg.min_jump:
                continue
            q = self.ik(xy, q_prev)
            travel = steps_to_reach(q_prev, q, xy, cfg.touch_radius, self.links, self.limits, cfg.max_travel_steps + 1)
            if travel <= cfg.max_travel_steps:
                return xy, q, travel
        raise SimConfigError(f"whack: no target reachable within max_travel_steps={cfg.max_travel_steps}")

    def required_hits(self, world: WhackWorld) -> int:
        return math.ceil(self.config.success_fraction * len(world.appear) - 1e-9)

    def update(self, world: WhackWorld, step: int, ee_xy: np.ndarray) -> list[Event]:
        events: list[Event] = []
        for i in np.flatnonzero((world.appear == step) & (world.status == PENDING)):
            world.status[i] = ACTIVE
            events.append(self._event("appear", step, world, i))
        for i in np.flatnonzero(world.status == ACTIVE):
            if np.hypot(*(ee_xy - world.positions[i])) <= self.config.touch_radius:
                world.status[i], world.hit_step[i] = HIT, step
                events.append({**self._event("touch", step, world, i), "latency_steps": int(step - world.appear[i])})
            elif step >= world.deadline[i]:
                world.status[i] = EXPIRED
                events.append(self._event("expire", step, world, i))
        return events

    @staticmethod
    def _event(kind: str, step: int, world: WhackWorld, i: int) -> Event:
        return {"kind": kind, "step": step, "id": int(i), "xy": world.positions[i].tolist()}

    def success(self, world: WhackWorld) -> bool:
        return int(np.sum(world.status == HIT)) >= self.required_hits(world)

    def metrics(self, world: WhackWorld) -> dict[str, float]:
        return {
            "hits": int(np.sum(world.status == HIT)),
            "expired": int(np.sum(world.status == EXPIRED)),
            "num_targets": len(world.appear),
            "hit_rate": float(np.mean(world.status == HIT)) if len(world.appear) else 0.0,
        }

    def target_xy(self, world: WhackWorld, step: int) -> np.ndarray | None:
        active = np.flatnonzero(world.status == ACTIVE)
        return world.positions[active[0]].copy() if active.size else None

    def draw_items(self, world: WhackWorld, step: int) -> list[DrawItem]:
        r = self.config.target_radius
        return [
            DrawItem(world.positions[i], r, COLORS[world.colors[i]]) for i in np.flatnonzero(world.status == ACTIVE)
        ]

    def expert_goal(self, world: WhackWorld, visible_step: int, step: int, c: np.ndarray, v: np.ndarray) -> Goal | None:
        seen = np.flatnonzero(world.appear <= visible_step)
        if seen.size == 0:
            return None
        return self.ik(world.positions[seen[-1]], c), 0.0
