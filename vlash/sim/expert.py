"""The scripted expert: rolls the planner forward under a task's goals (privileged, deterministic)."""

from __future__ import annotations

from typing import Any

import numpy as np

from vlash.sim.planner import PlanLimits, plan_step
from vlash.sim.tasks.base import Task


def expert_plan(
    task: Task,
    world: Any,
    limits: PlanLimits,
    command: np.ndarray,
    velocity: np.ndarray,
    first_step: int,
    visible_step: int,
    horizon: int,
) -> np.ndarray:
    """Absolute joint targets [horizon, J] for control steps first_step, first_step + 1, ...

    `command`/`velocity` is the plan state at the start of step `first_step`; targets are chosen
    with the knowledge available at `visible_step` only (see each task's visibility rule). The
    world is read, never modified.
    """
    c = np.asarray(command, dtype=np.float64).copy()
    v = np.asarray(velocity, dtype=np.float64).copy()
    out = np.empty((horizon, c.size))
    for i in range(horizon):
        goal = task.expert_goal(world, visible_step, first_step + i, c, v)
        q_goal, v_goal = (c, 0.0) if goal is None else goal
        c, v = plan_step(c, v, q_goal, v_goal, limits)
        out[i] = c
    return out
