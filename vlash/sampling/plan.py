"""Input validation and the precomputed per-run state of the flow sampler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from vlash.errors import ShapeError
from vlash.sampling.guidance import GuidanceConfig, guidance_weight, rtc_soft_mask
from vlash.sampling.results import PREFIX
from vlash.sampling.schedules import global_times


@dataclass
class SamplingPlan:
    """Everything a run needs, validated and placed on the noise's device before step 0."""

    prefix_len: int  # d: committed actions at indices [0, d)
    x0: Tensor  # fp32 [B, H, A]: the noise with the prefix written in
    prefix: Tensor | None  # fp32 [B, d, A] re-clamped after every step; None when d == 0
    taus: Tensor  # fp32 [N + 1, B, H]: per-token time fed to velocity_fn at each step
    dtaus: Tensor  # fp32 [N, H]: per-token Euler step tau_{k+1} - tau_k (computed in float64)
    frontier: list[int]  # per step: how many leading indices (prefix included) are final after it
    final_at_step: Tensor  # int64 [H]: first step after which each index is final; PREFIX for i < d
    guidance_target: Tensor | None = None  # fp32 [B, H, A] RTC target Y; None: unguided
    guidance_mask: Tensor | None = None  # fp32 [H] RTC soft mask W
    guidance_weights: list[float] = field(default_factory=list)  # per-step RTC weight w


def _check_actions(name: str, value: Tensor, batch: int | None, dim: int | None) -> None:
    if not isinstance(value, Tensor) or value.dim() != 3 or not value.is_floating_point():
        raise ShapeError(f"{name} must be a float [B, H, A] tensor, got {getattr(value, 'shape', value)!r}")
    if batch is not None and (value.shape[0], value.shape[2]) != (batch, dim):
        raise ShapeError(f"{name} must have batch {batch} and action dim {dim}, got shape {tuple(value.shape)}")


def _finality(grid: Tensor, prefix_len: int) -> tuple[list[int], Tensor]:
    """Leading-final counts per step and the step at which each index becomes final."""
    is_final = grid[1:] == 0  # [N, H]; once 0 a token stays 0 (tau is non-increasing in k)
    frontier = is_final.int().cumprod(dim=1).sum(dim=1).tolist()
    final_at = grid.shape[0] - 1 - is_final.sum(dim=0)
    final_at[:prefix_len] = PREFIX
    return frontier, final_at.to(torch.int64)


def _guidance(
    cfg: GuidanceConfig | None, target: Tensor, delay: int, noise: Tensor, num_steps: int
) -> tuple[Tensor, Tensor, list[float]]:
    if cfg is None:
        raise ValueError("guidance_target given but SamplerConfig.guidance is None")
    _check_actions("guidance_target", target, noise.shape[0], noise.shape[2])
    if target.shape != noise.shape:
        raise ShapeError(f"guidance_target must have shape {tuple(noise.shape)}, got {tuple(target.shape)}")
    mask = rtc_soft_mask(noise.shape[1], delay, cfg.execution_horizon).to(noise.device)
    weights = [guidance_weight(t, cfg.max_weight) for t in global_times(num_steps).tolist()[:-1]]
    return target.to(device=noise.device, dtype=torch.float32), mask, weights


def make_plan(
    grid_fn: Callable[[int, int], Tensor],
    guidance_cfg: GuidanceConfig | None,
    noise: Tensor,
    prefix: Tensor | None,
    guidance_target: Tensor | None,
    guidance_delay: int | None,
) -> SamplingPlan:
    """Validate the run inputs (ValueError naming the bad one) and precompute the plan.

    grid_fn(horizon, prefix_len) returns the float64 [N + 1, H] tau grid (final_tau snapped).
    """
    _check_actions("noise", noise, None, None)
    batch, horizon, dim = noise.shape
    d = 0
    if prefix is not None:
        _check_actions("prefix", prefix, batch, dim)
        d = prefix.shape[1]
        if d >= horizon:
            raise ValueError(f"prefix length must be < horizon {horizon}, got {d}")
    if guidance_delay is not None and guidance_target is None:
        raise ValueError("guidance_delay given without guidance_target")
    if guidance_delay is not None and prefix is not None and guidance_delay != d:
        raise ValueError(f"guidance_delay {guidance_delay} differs from the prefix length {d}")
    grid = grid_fn(horizon, d)
    device = noise.device
    x0 = noise.to(dtype=torch.float32, copy=True)
    prefix32 = None
    if d > 0:
        assert prefix is not None
        prefix32 = prefix.to(device=device, dtype=torch.float32)
        x0[:, :d] = prefix32
    taus = grid.float().to(device)[:, None, :].expand(-1, batch, -1).contiguous()
    dtaus = (grid[1:] - grid[:-1]).float().to(device)
    frontier, final_at = _finality(grid, d)
    plan = SamplingPlan(d, x0, prefix32, taus, dtaus, frontier, final_at)
    if guidance_target is not None:
        delay = d if guidance_delay is None else guidance_delay
        target, mask, weights = _guidance(guidance_cfg, guidance_target, delay, noise, grid.shape[0] - 1)
        plan.guidance_target, plan.guidance_mask, plan.guidance_weights = target, mask, weights
    return plan
