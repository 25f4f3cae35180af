"""intercept: a ball crosses the view on a straight line; touch it before it leaves.

Visibility rule: the ball and its (straight, constant-speed) future line are known to the expert
from its appearance step on, never before. The expert aims at the earliest point of the line it
can reach in time (analytic travel-time estimate plus a margin), re-chosen every step.

Calibration: a line is kept only when its *reaction budget* B lies in `budget_steps`: B is the
largest reaction delay (in steps after the ball appears, found by bisection) with which the expert
still intercepts the ball from rest at the reset configuration, simulated at reset with the
expert's own planner. A controller that starts moving more than ~B steps after the ball appears
misses it, so success falls measurably with reaction latency (see the `budget` of each episode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vlash import planar_arm as kinematics
from vlash.planar_arm import TWO_PI
from vlash.sim.config import check_int, check_positive, check_range
from vlash.sim.errors import SimConfigError
from vlash.sim.planner import plan_step, travel_time
from vlash.sim.tasks.base import BALL_COLOR, DrawItem, Event, Goal, Task

HIDDEN, FLYING, CAUGHT, GONE = 0, 1, 2, 3


@dataclass(frozen=True)
class InterceptConfig:
    """Episode parameters of `intercept`."""

    max_steps: int = 120  # episode length (4 s); the episode ends earlier, on intercept or exit
    hit_radius: float = 0.08  # end effector within this distance of the ball's centre intercepts it
    ball_radius: float = 0.05  # drawn radius
    appear_steps: tuple[int, int] = (6, 24)  # the ball appears at a step drawn from this range
    speed: tuple[float, float] = (1.5, 2.5)  # ball speed [world units / s]
    aim_radius: float = 0.6  # the line passes through a random point of this disc around the base
    radii: tuple[float, float] = (0.3, 0.86)  # the expert only aims at points within this annulus
    budget_steps: tuple[int, int] = (3, 15)  # accepted range of the line's reaction budget [steps]
    margin_steps: int = 1  # the expert's safety margin on its (conservative) travel-time estimate
    max_tries: int = 1000  # rejection-sampling attempts for a line

    def __post_init__(self) -> None:
        check_int("InterceptConfig", "max_steps", self.max_steps, 1)
        for name in ("hit_radius", "ball_radius", "aim_radius"):
            check_positive("InterceptConfig", name, getattr(self, name))
        check_range("InterceptConfig", "appear_steps", self.appear_steps, 0, self.max_steps)
        check_range("InterceptConfig", "speed", self.speed, 1e-3, 100.0)
        check_range("InterceptConfig", "radii", self.radii, 0.0, 1.0)
        check_range("InterceptConfig", "budget_steps", self.budget_steps, 0, self.max_steps)
        check_int("InterceptConfig", "margin_steps", self.margin_steps, 0)
        check_int("InterceptConfig", "max_tries", self.max_tries, 1)


@dataclass
class InterceptWorld:
    start: np.ndarray  # [2] ball centre at the appearance step
    velocity: np.ndarray  # [2] world units per second
    appear: int  # step at which the ball becomes visible
    exit: int  # first step at which the ball centre is outside the view (episode fails there)
    budget: int  # reaction budget of this line [steps]
    instruction: str
    path_steps: np.ndarray  # [M] steps at which the ball is inside the aiming annulus (expert's candidates)
    path_q: np.ndarray  # [2, M, 2] joint goals there, elbow-up (q1 >= 0) and elbow-down branches
    status: int = HIDDEN  # HIDDEN / FLYING / CAUGHT / GONE


class InterceptTask(Task):
    """Success: the end effector comes within hit_radius of the ball before it exits the view."""

    name = "intercept"
    config_type = InterceptConfig
    templates = ("intercept the ball", "catch the moving ball", "touch the ball before it leaves")

    def ball(self, world: InterceptWorld, step: np.ndarray | int) -> np.ndarray:
        t = (np.asarray(step, dtype=np.float64) - world.appear) * self.arm.control_dt
        return world.start + np.multiply.outer(t, world.velocity)

    def sample(self, rng: np.random.Generator, q_init: np.ndarray) -> InterceptWorld:
        cfg = self.config
        lo, hi = cfg.budget_steps
        for _ in range(cfg.max_tries):
            world = self._line(rng)
            if self.catches(world, q_init, lo) and not self.catches(world, q_init, hi + 1):
                while hi - lo > 0:  # bisection: lo is always caught, hi + 1 never
                    mid = (lo + hi + 1) // 2
                    lo, hi = (mid, hi) if self.catches(world, q_init, mid) else (lo, mid - 1)
                world.budget = lo
                world.instruction = self.instruction(rng)
                return world
        raise SimConfigError(f"intercept: no line with a budget in {cfg.budget_steps} in {cfg.max_tries} tries")

    def _line(self, rng: np.random.Generator) -> InterceptWorld:
        cfg = self.config
        side, along = int(rng.integers(4)), rng.uniform(-0.9, 0.9)
        start = np.array([[0.98, along], [-0.98, along], [along, 0.98], [along, -0.98]][side])
        angle, r = rng.uniform(-math.pi, math.pi), cfg.aim_radius * math.sqrt(rng.uniform())
        aim = np.array([r * math.cos(angle), r * math.sin(angle)])
        velocity = (aim - start) / np.hypot(*(aim - start)) * rng.uniform(*cfg.speed)
        appear = int(rng.integers(cfg.appear_steps[0], cfg.appear_steps[1] + 1))
        world = InterceptWorld(start, velocity, appear, 0, 0, "", np.zeros(0, np.int64), np.zeros((2, 0, 2)))
        steps = np.arange(appear, appear + 10_000)
        xy = self.ball(world, steps)
        world.exit = int(steps[np.argmin(np.all(np.abs(xy) <= 1.0, axis=-1))])
        r = np.hypot(xy[:, 0], xy[:, 1])
        keep = (r >= cfg.radii[0]) & (r <= cfg.radii[1]) & (steps < world.exit)
        world.path_steps, refs = steps[keep], np.zeros((int(keep.sum()), 2))
        world.path_q = np.stack([self.ik(xy[keep], refs + [0, sign]) for sign in (1.0, -1.0)])
        return world

    def _arrival(self, world: InterceptWorld, step: int, c: np.ndarray, v: np.ndarray):
        """Candidate steps (> step), their joint goals and the earliest step the plan can be there (estimate)."""
        first = int(np.searchsorted(world.path_steps, step, side="right"))
        q = world.path_q[0 if c[1] >= 0 else 1, first:].copy()
        q[:, 0] += TWO_PI * np.round((c[0] - q[:, 0]) / TWO_PI)
        eta = step + np.ceil(travel_time(c, v, q, self.limits) / self.arm.control_dt)
        return world.path_steps[first:], q, eta

    def catches(self, world: InterceptWorld, q_init: np.ndarray, delay: int) -> bool:
        """Whether the expert, resting at q_init until it sees the ball `delay` steps late, intercepts it
        (simulated on commanded positions, which the servo tracks closely; stops shortly after the
        ball leaves the aiming annulus for good)."""
        c, v = q_init.astype(np.float64), np.zeros(2)
        last = min(world.exit, int(world.path_steps[-1]) + 3 if world.path_steps.size else world.appear)
        for step in range(world.appear, last):
            if step >= world.appear + delay:
                q_goal, v_goal = self.expert_goal(world, step - delay, step, c, v) or (c, 0.0)
                c, v = plan_step(c, v, q_goal, v_goal, self.limits)
            if np.hypot(*(kinematics.forward(c, self.links) - self.ball(world, step + 1))) <= self.config.hit_radius:
                return True
        return False

    def update(self, world: InterceptWorld, step: int, ee_xy: np.ndarray) -> list[Event]:
        events: list[Event] = []
        if world.status == HIDDEN and step >= world.appear:
            world.status = FLYING
            xy, vel = self.ball(world, step).tolist(), world.velocity.tolist()
            events.append({"kind": "appear", "step": step, "id": 0, "xy": xy, "velocity": vel, "budget": world.budget})
        if world.status != FLYING:
            return events
        xy = self.ball(world, step)
        if np.hypot(*(ee_xy - xy)) <= self.config.hit_radius:
            world.status = CAUGHT
            events.append({"kind": "intercept", "step": step, "id": 0, "xy": xy.tolist()})
        elif step >= world.exit:
            world.status = GONE
            events.append({"kind": "exit", "step": step, "id": 0, "xy": xy.tolist()})
        return events

    def success(self, world: InterceptWorld) -> bool:
        return world.status == CAUGHT

    def terminated(self, world: InterceptWorld) -> bool:
        return world.status in (CAUGHT, GONE)

    def metrics(self, world: InterceptWorld) -> dict[str, int]:
        return {"budget_steps": world.budget}

    def target_xy(self, world: InterceptWorld, step: int) -> np.ndarray | None:
        return self.ball(world, step) if world.status == FLYING else None

    def target_velocity(self, world: InterceptWorld, step: int) -> np.ndarray:
        return world.velocity.copy() if world.status == FLYING else np.zeros(2)

    def draw_items(self, world: InterceptWorld, step: int) -> list[DrawItem]:
        if world.status != FLYING:
            return []
        return [DrawItem(self.ball(world, step), self.config.ball_radius, BALL_COLOR, outline=True)]

    def expert_goal(
        self, world: InterceptWorld, visible_step: int, step: int, c: np.ndarray, v: np.ndarray
    ) -> Goal | None:
        if visible_step < world.appear:
            return None
        steps, q, eta = self._arrival(world, step, c, v)
        if steps.size == 0:
            return None
        feasible = np.flatnonzero(eta + self.config.margin_steps <= steps)
        pick = feasible[0] if feasible.size else int(np.argmin(eta - steps))
        return q[pick], 0.0
