"""A minimal deterministic env with the robot_io.sim interface: one joint that tracks its command with a
first-order lag (half the error per step, like a real position controller, so the observed state trails
the command); the expert ramps toward a goal at `vmax` per step from the state it is given."""

from __future__ import annotations

import numpy as np

from vlash.eval.requests import PlanRequest, PlanResult


class RampEnv:
    dt = 1 / 30
    num_joints = 1
    instruction = "go to the goal"

    def __init__(self, goal: float = 3.0, vmax: float = 0.05, max_steps: int = 120) -> None:
        self.goal, self.vmax, self.max_steps = goal, vmax, max_steps

    def reset(self, seed: int = 0):
        self.q, self.step_index = 0.0, 0
        return self._obs(), {}

    def _obs(self):
        return {"image": np.zeros((8, 8, 3), np.uint8), "state": np.array([self.q], np.float32)}

    def step(self, action):
        target = float(np.asarray(action)[0])
        self.q += float(np.clip(0.5 * (target - self.q), -4 * self.vmax, 4 * self.vmax))
        self.step_index += 1
        success = abs(self.q - self.goal) < 1e-2
        truncated = self.step_index >= self.max_steps
        return self._obs(), 0.0, success, truncated, {"success": success, "events": []}

    def expert_chunk(self, horizon: int, state=None, start_offset: int = 0) -> np.ndarray:
        start = self.q if state is None else float(np.asarray(state)[0])
        steps = np.arange(1, horizon + 1)
        return np.clip(start + np.sign(self.goal - start) * self.vmax * steps, -10, self.goal)[:, None].astype(
            np.float32
        )

    def forward_kinematics(self, q):
        return np.array([float(q[0]), 0.0])


class RecordingPolicy:
    """Wraps a policy and remembers every request (and the env step it was made at)."""

    def __init__(self, inner) -> None:
        self.inner, self.horizon, self.requests = inner, inner.horizon, []

    def plan(self, request: PlanRequest, env) -> PlanResult:
        self.requests.append((env.step_index, request))
        return self.inner.plan(request, env)
