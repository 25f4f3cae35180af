"""Guided inference-time Real-Time Chunking (RTC, arXiv 2506.07339; docs/METHODS.md "rtc").

The new chunk is inpainted toward the not-yet-executed remainder Y of the previous chunk.
Our convention (t = 1 noise, v ≈ eps - a, Euler steps with dt < 0): the predicted clean
actions are a1_hat = x - tau * v, and the guided velocity is v - w * g with
g = d a1_hat/dx^T [(Y - a1_hat) * W], which moves a1_hat toward Y (x gains |dt| * w * g).

vlash takes the derivative with v held constant, so g = (Y - a1_hat) * W, as LeRobot 0.6.1 does
(its RTCProcessor evaluates v before x requires grad); tests/fixtures/lerobot_pi05_rtc holds its
actions. `GuidanceConfig.vjp` differentiates through the network instead (one vector-Jacobian
product per step), as the paper and Physical Intelligence's Kinetix code do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from vlash.sampling.guidance_weight_bounds import DEFAULT_GUIDANCE_WEIGHT, check_guidance_weight
from vlash.sampling.velocity import VelocityFn, eval_velocity


@dataclass(frozen=True)
class GuidanceConfig:
    """Settings of guided RTC. Guidance needs the constant schedule."""

    execution_horizon: int  # s: actions of a chunk executed before the next one takes over (>= 1)
    max_weight: float = DEFAULT_GUIDANCE_WEIGHT  # beta: upper clip of the guidance weight (paper: 5-10; LeRobot's 10)
    # True: g through the network's Jacobian (the paper's and Kinetix's form; one VJP per step, the torch engine
    # only); False: v held constant, g = the masked error (LeRobot 0.6.1's form, no autograd)
    vjp: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.execution_horizon, int) or self.execution_horizon < 1:
            raise ValueError(f"execution_horizon must be an int >= 1, got {self.execution_horizon!r}")
        check_guidance_weight(self.max_weight, "max_weight")
        if not isinstance(self.vjp, bool):
            raise ValueError(f"vjp must be a bool, got {self.vjp!r}")


def rtc_soft_mask(horizon: int, delay: int, execution_horizon: int) -> Tensor:
    """Soft inpainting mask W, fp32 [H].

    W_i = 1 for i < d; W_i = c_i (e^{c_i} - 1) / (e - 1) with c_i = (H - s - i) / (H - s - d + 1)
    for d <= i < H - s; 0 for i >= H - s. Requires 0 <= d and d + s <= H.
    """
    h, d, s = horizon, delay, execution_horizon
    if h < 1:
        raise ValueError(f"horizon must be >= 1, got {h!r}")
    if d < 0 or s < 0 or d + s > h:
        raise ValueError(
            f"need delay >= 0, execution_horizon >= 0 and delay + execution_horizon <= {h}, "
            f"got delay={d!r}, execution_horizon={s!r}"
        )
    i = torch.arange(h, dtype=torch.float64)
    c = (h - s - i) / (h - s - d + 1)
    w = c * torch.expm1(c) / (math.e - 1.0)
    w = torch.where(i < d, torch.ones_like(w), w)
    w = torch.where(i >= h - s, torch.zeros_like(w), w)
    return w.float()


def guidance_weight(t: float, max_weight: float) -> float:
    """RTC weight w = min(beta, (1 - r) / (r * r2)) with r = 1 - t, r2 = (1 - r)^2 / (r^2 + (1 - r)^2).

    `t` is the global (constant-schedule) time of the step, 1 at the first step. At r = 0 (the
    first step) and r = 1 the raw weight is unbounded and the result is beta.
    """
    r = 1.0 - t
    if r <= 0.0 or r >= 1.0:
        return float(max_weight)
    r2 = (1.0 - r) ** 2 / (r**2 + (1.0 - r) ** 2)
    return float(min(max_weight, (1.0 - r) / (r * r2)))


def guided_velocity(
    velocity_fn: VelocityFn,
    x: Tensor,
    tau: Tensor,
    target: Tensor,
    mask: Tensor,
    weight: float | Tensor,
    vjp: bool = False,
) -> Tensor:
    """One guided velocity evaluation: v - weight * g, fp32 [B, H, A], with err = (target - a1_hat) * mask and
    g = err (v held constant: LeRobot's form) or, with `vjp`, g = J^T err (J = d a1_hat / dx: the paper's form).

    x: fp32 [B, H, A]; tau: fp32 [B, H] (or [B, 1]: one time per row); target: fp32 [B, H, A]; mask: fp32 [H]
    (every row) or [B, H] (per row); weight: one float, or fp32 [B] per row. A row with mask 0 and weight 0 keeps
    its plain velocity (rows of a batch are independent, so its share of the vector-Jacobian product is 0). With
    `vjp` it costs one vector-Jacobian product through `velocity_fn`; without, nothing but the velocity.
    """
    if isinstance(weight, Tensor):
        weight = weight[:, None, None]
    if not vjp:
        with torch.no_grad():
            v = eval_velocity(velocity_fn, x, tau)
            err = (target - (x - tau[..., None] * v)) * mask.expand(x.shape[:2])[..., None]
            return v - weight * err
    with torch.enable_grad():
        x_in = x.detach().requires_grad_(True)
        v = eval_velocity(velocity_fn, x_in, tau)
        a1_hat = x_in - tau[..., None] * v
        err = (target - a1_hat.detach()) * mask.expand(x_in.shape[:2])[..., None]
        (g,) = torch.autograd.grad(a1_hat, x_in, grad_outputs=err)
    return v.detach() - weight * g
