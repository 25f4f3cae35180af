"""Chunk policies for the evaluation harness: the trained pi0.5 (any engine-free torch model) and the
privileged scripted-expert oracle."""

from __future__ import annotations

import numpy as np
import torch

from vlash.eval.requests import PlanRequest, PlanResult
from vlash.policies.pi05.processor import Observation
from vlash.policies.policy_dir import LoadedPolicy
from vlash.sampling import PREFIX, FlowSampler, GuidanceConfig, SamplerConfig


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
    """A trained pi0.5 policy directory behind the harness's request interface (CPU, torch eager)."""

    def __init__(self, policy: LoadedPolicy, num_steps: int | None = None, guidance_weight: float = 5.0) -> None:
        self.policy = policy
        self.model = policy.model.eval()
        self.processor = policy.processor
        self.horizon = policy.config.action_horizon
        self.num_steps = num_steps or policy.config.num_steps
        self.guidance_weight = guidance_weight
        self.camera = policy.config.camera_names[0]

    def _normalized(self, actions: np.ndarray) -> torch.Tensor:
        """Robot-unit actions [n, J] -> normalized, zero-padded model actions [1, n, A]."""
        proc, dim = self.processor, self.policy.config.action_dim
        norm = proc.normalizer.normalize(proc.action_key, np.asarray(actions, np.float32))
        padded = np.zeros((len(actions), dim), np.float32)
        padded[:, : norm.shape[-1]] = norm
        return torch.from_numpy(padded)[None]

    @torch.no_grad()
    def _prefill(self, request: PlanRequest):
        obs = Observation(images={self.camera: request.image}, state=request.state, prompt=request.instruction)
        return self.model.prefill(self.processor.preprocess([obs]))

    def plan(self, request: PlanRequest, env=None) -> PlanResult:
        cfg = self.policy.config
        cache = self._prefill(request)
        gen = torch.Generator().manual_seed(request.seed)
        noise = torch.randn(1, cfg.action_horizon, cfg.action_dim, generator=gen)
        guidance, target, delay = None, None, None
        if request.guidance is not None:
            g = request.guidance
            guidance = GuidanceConfig(execution_horizon=g.execution_horizon, max_weight=self.guidance_weight)
            target, delay = self._normalized(g.target), g.delay
        sampler = FlowSampler(SamplerConfig(num_steps=self.num_steps, schedule=request.schedule, guidance=guidance))
        prefix = self._normalized(request.prefix) if request.prefix is not None else None

        def velocity(x, tau):
            return self.model.denoise_step(x, tau, cache)

        result = sampler.sample(velocity, noise, prefix=prefix, guidance_target=target, guidance_delay=delay)
        actions = self.processor.postprocess(result.actions)[0]
        if request.prefix is not None:  # bit-exact committed actions, not their normalize/unnormalize round trip
            actions[: len(request.prefix)] = request.prefix
        return PlanResult(actions.astype(np.float32), result.final_at_step.numpy(), self.num_steps)
