"""The flow sampler's settings (`SamplerConfig`), input validation and the precomputed per-run state, per row of the
batch.

A plan's rows may differ in schedule, committed prefix, guided-RTC target and early stop (one plan per request,
stacked with `stack_plans`); they share the number of steps N, the horizon H and the action dim A.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from vlash.errors import ShapeError
from vlash.sampling.events import PREFIX
from vlash.sampling.guidance import GuidanceConfig, guidance_weight, rtc_soft_mask
from vlash.sampling.schedules import Schedule, build_tau_grid_f64, global_times


@dataclass
class SamplerConfig:
    """Settings of `FlowSampler`."""

    num_steps: int = 10  # N Euler steps from t = 1 to t = 0 (pi0.5: 10), >= 1
    schedule: Schedule | str = Schedule.CONSTANT  # per-token time grid: "constant" or "horizon-aware"
    alpha: float = 0.6  # horizon-aware exponent of the hit times, > 0 (ignored by "constant")
    u0: float | None = None  # horizon-aware hit time of the first new action in [0, 1); None: (N-1)/N
    # Per-token times <= final_tau are snapped to 0 in the grid, so the step that crosses it
    # integrates straight to tau = 0. An action is final once its tau is exactly 0; it never
    # changes afterwards. In [0, 1); the constant schedule is unaffected while 1/N > final_tau.
    final_tau: float = 0.01
    early_stop_final: int | None = None  # stop once indices [0, k) (prefix included) are final; None: all
    guidance: GuidanceConfig | None = None  # guided RTC (constant schedule only); None: off

    def __post_init__(self) -> None:
        if not isinstance(self.num_steps, int) or self.num_steps < 1:
            raise ValueError(f"num_steps must be an int >= 1, got {self.num_steps!r}")
        try:
            self.schedule = Schedule(self.schedule)
        except ValueError:
            names = [s.value for s in Schedule]
            raise ValueError(f"schedule must be one of {names}, got {self.schedule!r}") from None
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"alpha must be a finite float > 0, got {self.alpha!r}")
        if self.u0 is not None and not 0.0 <= self.u0 < 1.0:
            raise ValueError(f"u0 must be None or in [0, 1), got {self.u0!r}")
        if not 0.0 <= self.final_tau < 1.0:
            raise ValueError(f"final_tau must be in [0, 1), got {self.final_tau!r}")
        k = self.early_stop_final
        if k is not None and (not isinstance(k, int) or k < 1):
            raise ValueError(f"early_stop_final must be None or an int >= 1, got {k!r}")
        if self.guidance is not None and self.schedule is not Schedule.CONSTANT:
            raise ValueError(
                f"guided RTC needs schedule='constant', got schedule={self.schedule.value!r}; "
                "use a committed prefix for horizon-aware sampling instead"
            )


@dataclass
class SamplingPlan:
    """Everything a run needs, validated and placed on the noise's device before step 0; every field is per row."""

    x0: Tensor  # fp32 [B, H, A]: the noise with each row's prefix written in
    held: Tensor  # bool [B, H]: committed prefix positions, re-clamped to x0 after every step
    prefix_lens: list[int]  # per row d: committed actions at indices [0, d)
    taus: Tensor  # fp32 [N + 1, B, H]: per-token time fed to velocity_fn at each step
    dtaus: Tensor  # fp32 [N, B, H]: per-token Euler step tau_{k+1} - tau_k (computed in float64)
    frontier: Tensor  # int64 [N, B] (CPU): leading indices (prefix included) final after each step
    final_at_step: Tensor  # int64 [B, H] (CPU): first step after which each index is final; PREFIX for i < d
    last_step: list[int]  # per row: the step after which it stops (its early stop; N - 1 without one)
    guided: list[bool]  # per row: guided RTC on
    shared_time: list[bool]  # per step: every row's tokens share one time (taus[k, b, :] all equal, e.g. constant)
    guidance_target: Tensor | None = None  # fp32 [B, H, A] RTC target Y (0 on unguided rows); None: no row guided
    guidance_mask: Tensor | None = None  # fp32 [B, H] RTC soft mask W (0 on unguided rows)
    guidance_weights: Tensor | None = None  # fp32 [N, B] per-step RTC weight w (0 on unguided rows)
    guidance_vjp: bool = False  # the guided rows' GuidanceConfig.vjp (g through the network's Jacobian)

    @property
    def batch(self) -> int:
        return self.x0.shape[0]

    @property
    def num_steps(self) -> int:
        return self.dtaus.shape[0]


def _check_actions(name: str, value: Tensor, batch: int | None, dim: int | None) -> None:
    if not isinstance(value, Tensor) or value.dim() != 3 or not value.is_floating_point():
        raise ShapeError(f"{name} must be a float [B, H, A] tensor, got {getattr(value, 'shape', value)!r}")
    if batch is not None and (value.shape[0], value.shape[2]) != (batch, dim):
        raise ShapeError(f"{name} must have batch {batch} and action dim {dim}, got shape {tuple(value.shape)}")


def _finality(grid: Tensor, prefix_len: int) -> tuple[Tensor, Tensor]:
    """Leading-final counts per step [N] and the step at which each index becomes final [H]."""
    is_final = grid[1:] == 0  # [N, H]; once 0 a token stays 0 (tau is non-increasing in k)
    frontier = is_final.int().cumprod(dim=1).sum(dim=1).to(torch.int64)
    final_at = grid.shape[0] - 1 - is_final.sum(dim=0)
    final_at[:prefix_len] = PREFIX
    return frontier, final_at.to(torch.int64)


def _last_step(frontier: Tensor, early_stop_final: int | None, horizon: int) -> int:
    """The first step after which indices [0, early_stop_final) are final; the last step without an early stop."""
    if early_stop_final is None:
        return frontier.shape[0] - 1
    if early_stop_final > horizon:
        raise ValueError(f"early_stop_final must be <= horizon {horizon}, got {early_stop_final}")
    reached = (frontier >= early_stop_final).nonzero()
    return int(reached[0]) if len(reached) else frontier.shape[0] - 1


def _guidance(
    cfg: GuidanceConfig | None, target: Tensor, delay: int, noise: Tensor, num_steps: int
) -> tuple[Tensor, Tensor, Tensor]:
    if cfg is None:
        raise ValueError("guidance_target given but SamplerConfig.guidance is None")
    _check_actions("guidance_target", target, noise.shape[0], noise.shape[2])
    if target.shape != noise.shape:
        raise ShapeError(f"guidance_target must have shape {tuple(noise.shape)}, got {tuple(target.shape)}")
    batch, horizon = noise.shape[:2]
    mask = rtc_soft_mask(horizon, delay, cfg.execution_horizon).to(noise.device)
    weights = [guidance_weight(t, cfg.max_weight) for t in global_times(num_steps).tolist()[:-1]]
    weights32 = torch.tensor(weights, dtype=torch.float32, device=noise.device)[:, None].expand(-1, batch)
    target32 = target.to(device=noise.device, dtype=torch.float32)
    return target32, mask[None].expand(batch, -1).contiguous(), weights32.contiguous()


def tau_grid_f64(config: SamplerConfig, horizon: int, prefix_len: int) -> Tensor:
    """The float64 [N + 1, H] per-token time grid of `config`'s schedule, times <= final_tau snapped to 0."""
    grid = build_tau_grid_f64(config.schedule, config.num_steps, horizon, prefix_len, config.alpha, config.u0)
    return torch.where(grid <= config.final_tau, torch.zeros_like(grid), grid)


def make_plan(
    config: SamplerConfig,
    noise: Tensor,
    prefix: Tensor | None,
    guidance_target: Tensor | None,
    guidance_delay: int | None,
) -> SamplingPlan:
    """Validate the run inputs (ValueError naming the bad one) and precompute the plan of `noise`'s B rows, all with
    `config`'s settings."""
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
    grid = tau_grid_f64(config, horizon, d)
    frontier, final_at = _finality(grid, d)
    shared_time = (grid[:-1] == grid[:-1, :1]).all(dim=1).tolist()  # decided once, from the float64 grid
    last = _last_step(frontier, config.early_stop_final, horizon)
    device = noise.device
    x0 = noise.to(dtype=torch.float32, copy=True)
    if d > 0:
        assert prefix is not None
        x0[:, :d] = prefix.to(device=device, dtype=torch.float32)
    held = torch.zeros(batch, horizon, dtype=torch.bool, device=device)
    held[:, :d] = True

    def rows(t: Tensor) -> Tensor:  # [K, H] -> [K, B, H]
        return t.float().to(device)[:, None, :].expand(-1, batch, -1).contiguous()

    plan = SamplingPlan(
        x0=x0,
        held=held,
        prefix_lens=[d] * batch,
        taus=rows(grid),
        dtaus=rows(grid[1:] - grid[:-1]),
        frontier=frontier[:, None].expand(-1, batch).contiguous(),
        final_at_step=final_at[None].expand(batch, -1).contiguous(),
        last_step=[last] * batch,
        guided=[guidance_target is not None] * batch,
        shared_time=shared_time,
    )
    if guidance_target is not None:
        delay = d if guidance_delay is None else guidance_delay
        target, mask, weights = _guidance(config.guidance, guidance_target, delay, noise, grid.shape[0] - 1)
        plan.guidance_target, plan.guidance_mask, plan.guidance_weights = target, mask, weights
        plan.guidance_vjp = bool(config.guidance is not None and config.guidance.vjp)
    return plan


def stack_plans(plans: Sequence[SamplingPlan]) -> SamplingPlan:
    """One plan of every row of `plans`, in order (same N, H, A and device; ShapeError otherwise). Rows of
    unguided plans get target 0, mask 0 and weight 0 when another plan is guided; guided plans must share
    GuidanceConfig.vjp (ValueError)."""
    if not plans:
        raise ValueError("stack_plans needs at least one plan")
    if len(plans) == 1:
        return plans[0]
    kinds = {(p.num_steps, tuple(p.x0.shape[1:]), p.x0.device) for p in plans}
    if len(kinds) > 1:
        raise ShapeError(f"plans to stack must share num_steps, [H, A] and device, got {sorted(map(str, kinds))}")

    def cat(name: str, dim: int = 0) -> Tensor:
        return torch.cat([getattr(p, name) for p in plans], dim=dim)

    plan = SamplingPlan(
        x0=cat("x0"),
        held=cat("held"),
        prefix_lens=[d for p in plans for d in p.prefix_lens],
        taus=cat("taus", 1),
        dtaus=cat("dtaus", 1),
        frontier=cat("frontier", 1),
        final_at_step=cat("final_at_step"),
        last_step=[k for p in plans for k in p.last_step],
        guided=[g for p in plans for g in p.guided],
        shared_time=[all(shared) for shared in zip(*(p.shared_time for p in plans), strict=True)],
    )
    if any(plan.guided):
        vjp = {p.guidance_vjp for p in plans if any(p.guided)}
        if len(vjp) > 1:
            raise ValueError("plans to stack must share GuidanceConfig.vjp")
        plan.guidance_vjp = vjp.pop()
        plan.guidance_target = torch.cat([_or_zeros(p.guidance_target, p.x0) for p in plans])
        plan.guidance_mask = torch.cat([_or_zeros(p.guidance_mask, p.held, torch.float32) for p in plans])
        plan.guidance_weights = torch.cat([_or_zeros(p.guidance_weights, p.dtaus[:, :, 0]) for p in plans], dim=1)
    return plan


def _or_zeros(value: Tensor | None, like: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    return value if value is not None else torch.zeros_like(like, dtype=dtype)
