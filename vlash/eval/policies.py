"""Chunk policies for the evaluation harness: the trained pi0.5 (any engine-free torch model) and the
privileged scripted-expert oracle."""

from __future__ import annotations

import numpy as np

from vlash.engines.base import create_engine
from vlash.eval.requests import PlanRequest, PlanResult
from vlash.policies.policy_dir import LoadedPolicy
from vlash.runtime.policy_runtime import ChunkRequest, PolicyRuntime
from vlash.sampling import PREFIX


class OraclePolicy:
    """The scripted expert's plan from the given state (the mechanism without learning error).

    It sees the world at request time (plus `start_offset` steps for the future-state mode, as a policy
    trained with future-state offsets learns to); a committed prefix is kept and the plan continues from
    its last action. Guidance is ignored (the expert's plan is already the one it would inpaint).
    """

    def __init__(self, horizon: int = 50, num_steps: int = 10) -> None:
        self.horizon, self.num_steps = horizon, num_steps

    def plan(self, request: PlanRequest, env) -> PlanResult:
        final = np.zeros(self.horizon, dtype=np.int64)
        if request.prefix is not None and len(request.prefix):
            c = len(request.prefix)
            rest = env.expert_chunk(self.horizon - c, state=request.prefix[-1], start_offset=request.start_offset + c)
            final[:c] = PREFIX
            return PlanResult(np.concatenate([request.prefix, rest]).astype(np.float32), final, self.num_steps)
        actions = env.expert_chunk(self.horizon, state=request.state, start_offset=request.start_offset)
        return PlanResult(np.asarray(actions, np.float32), final, self.num_steps)


class ModelPolicy:
    """A trained pi0.5 policy directory behind the harness's request interface (torch engine, eager).

    Requests go through `vlash.runtime.policy_runtime.PolicyRuntime`, the same request -> chunk path as the server.
    """

    def __init__(self, policy: LoadedPolicy, num_steps: int | None = None, guidance_weight: float = 5.0) -> None:
        self.policy = policy
        self.model = policy.model.eval()
        self.processor = policy.processor
        self.horizon = policy.config.action_horizon
        self.num_steps = num_steps or policy.config.num_steps
        self.guidance_weight = guidance_weight
        self.camera = policy.config.camera_names[0]
        engine = create_engine("torch", model=self.model)
        self.runtime = PolicyRuntime(policy, engine, num_steps=self.num_steps, guidance_weight=guidance_weight)

    def plan(self, request: PlanRequest, env=None) -> PlanResult:
        g = request.guidance
        chunk_request = ChunkRequest(
            images={self.camera: request.image},
            state=request.state,
            prompt=request.instruction,
            prefix=request.prefix,
            schedule=request.schedule,
            guidance=None if g is None else g.target,
            delay_steps=0 if g is None else g.delay,
            execution_horizon=None if g is None else g.execution_horizon,
            seed=request.seed,
        )
        result = self.runtime.run(chunk_request)
        return PlanResult(result.actions, result.final_at_step, self.num_steps)
