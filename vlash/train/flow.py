"""Flow-matching training targets (docs/METHODS.md "Flow sampling"): per-token times, noisy actions, masked loss.

Convention: t = 1 is noise, t = 0 is data; x_t = t * eps + (1 - t) * a; the network predicts
v ≈ u = eps - a. Global times t ~ Beta(1.5, 1) * 0.999 + 0.001 (pi0.5). Per-token times: committed
prefix positions are 0 (x_t = a exactly there); the other positions take t (constant rows) or the
horizon-aware schedule at t (FASTER rows).
"""

from __future__ import annotations

import torch
from torch import Tensor

from vlash.sampling import horizon_aware_tau

BETA_A = 1.5  # pi0.5's Beta(1.5, 1) time distribution
T_MIN = 0.001  # t = BETA * (1 - T_MIN) + T_MIN, never exactly 0


def draw_times(batch: int, generator: torch.Generator) -> Tensor:
    """Global flow times t [B] fp32 ~ Beta(1.5, 1) * 0.999 + 0.001.

    Beta(a, 1) has CDF x**a, so t = U**(1/a) (inverse CDF) draws it exactly from a seeded generator.
    """
    u = torch.rand(batch, generator=generator, dtype=torch.float64)
    return (u ** (1.0 / BETA_A) * (1.0 - T_MIN) + T_MIN).float()


def token_times(
    t: Tensor, prefix_len: Tensor, use_has: Tensor, horizon: int, alpha: float = 0.6, u0: float = 0.9
) -> Tensor:
    """Per-token times tau [B, H] fp32: 0 on the prefix, horizon-aware where `use_has`, else t."""
    prefix_len = prefix_len.to(torch.int64)
    index = torch.arange(horizon)
    constant = torch.where(index[None, :] < prefix_len[:, None], 0.0, t.double()[:, None])
    has = horizon_aware_tau(t.double(), horizon, prefix_len, alpha=alpha, u0=u0)
    return torch.where(use_has[:, None], has, constant).float()


def noisy_actions(actions: Tensor, noise: Tensor, tau: Tensor) -> tuple[Tensor, Tensor]:
    """(x_t, u): x_t = tau * eps + (1 - tau) * a per token, target velocity u = eps - a; all [B, H, A]."""
    w = tau[..., None]
    return w * noise + (1.0 - w) * actions, noise - actions


def _masked_mse(err: Tensor, mask: Tensor) -> Tensor:
    """Mean over masked tokens of the per-token mean over the last axis; err [B, H, D], mask [B, H]."""
    per_token = err.mean(dim=-1)
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


def flow_loss(
    v: Tensor, u: Tensor, loss_mask: Tensor, tau: Tensor, real_dims: int, pad_weight: float
) -> tuple[Tensor, Tensor]:
    """(loss to optimize, loss on the real action dims) of velocity v vs target u, both [B, H, A].

    Counted tokens: `loss_mask` (real targets after the committed prefix) and still noisy (tau > 0) — a
    token at tau = 0 carries its clean action as input, is final during sampling and its velocity is never
    used (its target eps - a is unpredictable there). The real dims [:real_dims] and the zero-padded dims
    are averaged separately; the padded dims enter with `pad_weight` so that, during sampling, the padded
    coordinates follow their noise path (v = eps) as in training instead of drifting (openpi trains on all
    32 dims), without diluting the real dims' share of the gradient 16:1.
    """
    mask = (loss_mask & (tau > 0)).to(v.dtype)
    err = (v.float() - u.float()).square()
    real = _masked_mse(err[..., :real_dims], mask)
    if real_dims == err.shape[-1] or pad_weight == 0.0:
        return real, real
    return real + pad_weight * _masked_mse(err[..., real_dims:], mask), real
