"""Chunk policies for the evaluation harness: the trained pi0.5 (torch engine) and the scripted-expert oracle.

A ChunkPolicy gives each episode a planner: an Infer (what the executor under evaluation sent) -> a PlanResult
(the chunk and when its rows became final, for the simulated link's timing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from robot_io.protocol import Infer, Limits
from vlash.eval.link import PlanResult, oracle_result
from vlash.sampling.guidance_weight_bounds import DEFAULT_GUIDANCE_WEIGHT
from vlash.sim.oracle import Commanded, ExpertPlanner
from vlash.sim.robot import SIM_CAMERA

Planner = Callable[[Infer], PlanResult]
LIMITS = Limits()  # a served policy's (ServerConfig's default)


class ChunkPolicy(Protocol):
    """Anything that turns requests into chunks: the trained model, or the scripted-expert oracle."""

    horizon: int  # H: chunk length
    num_steps: int  # N: denoise steps of a whole chunk
    camera: str  # the camera name its requests carry the simulator's image under
    action_interface: str | None  # the simulator actions it was trained for; None: any (or not recorded)
    state_dims: int | None  # entries its requests' state must have; None: any
    state_names: list[str] | None  # what those entries are (the simulator's state_names); None: not recorded

    def planner(self, env: Any, commanded: Commanded, action_stride: int) -> Planner: ...


class OraclePolicy:
    """The scripted expert's plan (vlash.sim.oracle.ExpertPlanner: the mechanism without learning error), with the
    finality of the sampler the request asked for."""

    camera = SIM_CAMERA
    action_interface = None  # the expert plans in whatever the simulator takes
    state_dims = state_names = None  # it plans from the state's leading entries, whatever follows them

    def __init__(self, horizon: int = 50, num_steps: int = 10) -> None:
        self.horizon, self.num_steps = horizon, num_steps

    def planner(self, env: Any, commanded: Commanded, action_stride: int) -> Planner:
        expert = ExpertPlanner(env, self.horizon, commanded, action_stride)
        return lambda infer: oracle_result(expert(infer), infer, self.num_steps)


class LearnedPolicy:
    """A trained pi0.5 policy directory behind the harness (torch engine, eager), through
    `vlash.runtime.PolicyRuntime`: the same request -> chunk path as the server, each request admitted as every entry
    point admits one (vlash.runtime.admission: a request the server would refuse fails the evaluation)."""

    def __init__(self, policy, num_steps: int | None = None, guidance_weight: float = DEFAULT_GUIDANCE_WEIGHT) -> None:
        from vlash.engines.base import create_engine  # extra: server
        from vlash.runtime.metadata import policy_metadata  # extra: server
        from vlash.runtime.policy_runtime import PolicyRuntime  # extra: server

        self.policy = policy
        self.horizon = policy.config.action_horizon
        self.num_steps = num_steps or policy.config.num_steps
        self.camera = policy.config.camera_names[0]
        self.action_interface = policy.metadata.get("sim", {}).get("action_interface")  # as vlash train records it
        self.state_names = policy.metadata.get("state_names")  # as vlash train records it
        engine = create_engine("torch", model=policy.model.eval())
        self.runtime = PolicyRuntime(policy, engine, num_steps=self.num_steps, guidance_weight=guidance_weight)
        self.state_dims = self.runtime.state_dims
        precision = str(next(policy.model.parameters()).dtype).removeprefix("torch.")
        self.metadata = policy_metadata(self.runtime, "eval", "torch", precision)  # what admission checks against

    def planner(self, env: Any, commanded: Commanded, action_stride: int) -> Planner:
        from vlash.runtime.admission import admit  # extra: server

        def plan(infer: Infer) -> PlanResult:
            result = self.runtime.run(admit(infer, self.metadata, LIMITS))
            return PlanResult(result.actions, np.asarray(result.final_at_step), result.num_steps)

        return plan
