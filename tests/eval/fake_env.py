"""A minimal deterministic env with the vlash.sim interface the harness uses: one joint that tracks its command
with a first-order lag (half the error per step, like a real position controller, so the observed state trails the
command); the expert ramps toward a goal at `vmax` per step from the state it is given. RecordingPolicy records
every request the executor under evaluation sent, and what the policy answered."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from robot_io.executors import ExecutorConfig
from robot_io.protocol import Infer
from vlash.eval.episode import EpisodeRunner
from vlash.eval.link import LinkTiming, PlanResult
from vlash.eval.policies import OraclePolicy


class RampEnv:
    dt = 1 / 30
    num_joints = 1
    instruction = "go to the goal"
    action_interface = "position"
    action_space = SimpleNamespace(low=np.array([-10.0], np.float32), high=np.array([10.0], np.float32))
    arm_config = SimpleNamespace(link_lengths=(1.0,))

    def __init__(self, goal: float = 3.0, vmax: float = 0.05, max_steps: int = 120) -> None:
        self.goal, self.vmax, self.max_steps = goal, vmax, max_steps
        self.q, self.step_index = 0.0, 0
        self.expert_calls: list[dict] = []  # the arguments of every expert_chunk call (what the oracle asked for)

    def reset(self, seed: int | None = 0):
        self.q, self.step_index, self.expert_calls = 0.0, 0, []
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

    def expert_chunk(self, horizon: int, state=None, start_offset: int = 0, velocity=None) -> np.ndarray:
        self.expert_calls.append(dict(step=self.step_index, state=state, start_offset=start_offset, velocity=velocity))
        start = self.q if state is None else float(np.asarray(state)[0])
        steps = np.arange(1, horizon + 1)
        ramp = np.clip(start + np.sign(self.goal - start) * self.vmax * steps, -10, self.goal)
        return ramp[:, None].astype(np.float32)

    def forward_kinematics(self, q):
        return np.array([float(q[0]), 0.0])


@dataclass
class Request:
    """One request as the policy saw it: the env step it was planned at, the Infer, and the answer."""

    env_step: int
    infer: Infer
    result: PlanResult


class RecordingPolicy:
    """Wraps a ChunkPolicy and remembers every request of the last episode (`requests`, in order)."""

    def __init__(self, inner) -> None:
        self.inner, self.horizon, self.num_steps, self.camera = inner, inner.horizon, inner.num_steps, inner.camera
        self.requests: list[Request] = []

    def planner(self, env, commanded, action_stride: int):
        inner = self.inner.planner(env, commanded, action_stride)
        self.requests = []

        def plan(infer: Infer) -> PlanResult:
            result = inner(infer)
            self.requests.append(Request(env.step_index, infer, result))
            return result

        return plan

    @property
    def steps(self) -> list[int]:
        """The control steps the requests were made at (their observations')."""
        return [r.infer.step_index for r in self.requests]


def run_ramp(mode: str, delay: int, s: int = 10, q: int = 1, env: RampEnv | None = None, **executor):
    """(trace, recording policy) of one RampEnv episode under the scripted-expert oracle; d is LinkTiming's (the
    executor's initial estimate is set by the episode, so 1 is valid for every s)."""
    policy = RecordingPolicy(OraclePolicy(horizon=50))
    config = ExecutorConfig(mode=mode, execution_horizon=s, action_stride=q, initial_delay=1, **executor)
    trace = EpisodeRunner(env or RampEnv(), policy, config, LinkTiming(delay)).run(0)
    return trace, policy
