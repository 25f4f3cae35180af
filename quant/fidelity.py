"""Action fidelity of a quantized engine vs the fp32 reference (docs/BENCHMARKS.md, "Quantization fidelity gate").

Both engines sample the same held-out observations with the SAME noise through the same fp32 Euler
sampler; the chunks are compared in normalized model units on the robot's real action dims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from vlash.engines.base import Engine
from vlash.errors import ConfigError
from vlash.policies.pi05.model import Pi05Inputs
from vlash.quant.gate_thresholds import GateThresholds
from vlash.sampling import FlowSampler, SamplerConfig


@dataclass
class ActionFidelity:
    observations: int  # held-out observations compared
    cosine_min: float  # worst per-observation cosine
    cosine_mean: float
    max_abs_error: float
    mean_abs_error: float

    def to_dict(self) -> dict:
        return asdict(self)


def sample_chunk(engine: Engine, inputs: Pi05Inputs, noise: Tensor, num_steps: int) -> Tensor:
    """Model-space actions [B, H, A] (fp32) from `noise` through the constant-schedule Euler sampler."""
    with torch.no_grad():
        cache = engine.prefill(inputs)

        def velocity(x: Tensor, tau: Tensor) -> Tensor:
            return engine.denoise_step(x, tau, cache).float()

        sampler = FlowSampler(SamplerConfig(num_steps=num_steps))
        run = sampler.start(
            velocity, noise.to(engine.device), synchronize=engine.synchronize, spans=engine.spans(cache)
        )
        return run.drain().actions.float().cpu()


def action_fidelity(
    reference: Engine,
    candidate: Engine,
    observations: Sequence[Pi05Inputs],
    action_dims: int,
    num_steps: int,
    seed: int = 0,
) -> ActionFidelity:
    """Compare `candidate` with `reference` on every observation, each with its own fixed noise draw."""
    if not observations:
        raise ConfigError("action_fidelity needs at least one held-out observation")
    cfg = reference.config
    cosines, max_abs, abs_sum, count = [], 0.0, 0.0, 0
    for i, inputs in enumerate(observations):
        gen = torch.Generator().manual_seed(seed + i)
        noise = torch.randn(inputs.batch_size, cfg.action_horizon, cfg.action_dim, generator=gen)
        ref = sample_chunk(reference, inputs, noise, num_steps)[..., :action_dims].double()
        got = sample_chunk(candidate, inputs, noise, num_steps)[..., :action_dims].double()
        diff = (got - ref).abs()
        max_abs = max(max_abs, float(diff.max()))
        abs_sum, count = abs_sum + float(diff.sum()), count + diff.numel()
        for r, g in zip(ref.flatten(1), got.flatten(1), strict=True):
            cosines.append(float(torch.nn.functional.cosine_similarity(r, g, dim=0)))
    return ActionFidelity(len(cosines), min(cosines), sum(cosines) / len(cosines), max_abs, abs_sum / count)


def action_gate(fidelity: ActionFidelity, thresholds: GateThresholds) -> list[str]:
    """Failure reasons of the action metrics (empty: pass)."""
    reasons = []
    if not fidelity.cosine_min >= thresholds.min_cosine:
        reasons.append(f"cosine {fidelity.cosine_min:.4f} < {thresholds.min_cosine}")
    if not fidelity.max_abs_error <= thresholds.max_abs_error:
        reasons.append(f"max-abs error {fidelity.max_abs_error:.4f} > {thresholds.max_abs_error}")
    return reasons
