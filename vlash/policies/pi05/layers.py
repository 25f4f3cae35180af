"""Building blocks shared by the pi0.5 stacks: RMSNorm (1 + w), adaRMS, RoPE, masked attention.

Numerics follow openpi: norm statistics, RoPE angles and softmax run in fp32 whatever the weights'
dtype; masked logits get a large finite negative (not -inf) so fully masked rows stay finite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def gelu_tanh(x: Tensor) -> Tensor:
    """flax nn.gelu default: the tanh approximation (Gemma and SigLIP both use it)."""
    return F.gelu(x, approximate="tanh")


def _rms_normalize(x: Tensor, eps: float) -> Tensor:
    x32 = x.float()
    return x32 * torch.rsqrt(x32.square().mean(dim=-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """Gemma RMSNorm: x / rms(x) * (1 + weight), statistics in fp32; weight is zero-initialised."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: Tensor) -> Tensor:
        return (_rms_normalize(x, self.eps) * (1.0 + self.weight.float())).to(x.dtype)


class AdaRMSNorm(nn.Module):
    """Adaptive RMSNorm of the action expert: [scale, shift, gate] = dense(cond), per token.

    Returns (normed * (1 + scale) + shift, gate); the caller applies the gated residual x + y * gate.
    """

    def __init__(self, dim: int, cond_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.dense = nn.Linear(cond_dim, 3 * dim)

    def forward(self, x: Tensor, cond: Tensor) -> tuple[Tensor, Tensor]:
        scale, shift, gate = self.dense(cond).chunk(3, dim=-1)
        y = _rms_normalize(x, self.eps) * (1.0 + scale.float()) + shift.float()
        return y.to(x.dtype), gate.to(x.dtype)


def rope_tables(positions: Tensor, head_dim: int, base: float) -> tuple[Tensor, Tensor]:
    """cos/sin tables [B, 1, S, head_dim/2] in fp32 for integer positions [B, S]."""
    exponent = torch.arange(head_dim // 2, device=positions.device, dtype=torch.float64) * 2.0 / head_dim
    inv_timescale = (1.0 / base**exponent).float()
    radians = positions.float()[..., None] * inv_timescale
    return radians.cos()[:, None], radians.sin()[:, None]


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Split-half (non-interleaved) rotary embedding on x [B, heads, S, head_dim]."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def attention_bias(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """Additive bias [B, 1, Q, K] from a boolean mask [B, Q, K] (True = may attend)."""
    # openpi masks with -2.38e38 (fp32); half of the dtype's range stays finite after adding logits.
    masked = torch.finfo(dtype).min / 2
    bias = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return bias.masked_fill_(~allowed, masked)[:, None]


_EXPLICIT_ATTENTION = False  # set only inside `explicit_attention()` (ONNX export)


@contextmanager
def explicit_attention() -> Iterator[None]:
    """Within this block `attend` uses matmul + softmax instead of SDPA(enable_gqa=...), which the ONNX
    exporters cannot trace. Same numerics up to fp rounding; used only while exporting graphs."""
    global _EXPLICIT_ATTENTION
    previous, _EXPLICIT_ATTENTION = _EXPLICIT_ATTENTION, True
    try:
        yield
    finally:
        _EXPLICIT_ATTENTION = previous


def attend(q: Tensor, k: Tensor, v: Tensor, bias: Tensor) -> Tensor:
    """Multi-query attention. q [B, N, S, hd] (already scaled), k/v [B, K, T, hd] -> [B, S, N*hd]."""
    batch, heads, seq, head_dim = q.shape
    if _EXPLICIT_ATTENTION:
        out = _attend_grouped_matmul(q, k, v, bias)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0, enable_gqa=k.shape[1] != heads)
    return out.transpose(1, 2).reshape(batch, seq, heads * head_dim)


def _attend_grouped_matmul(q: Tensor, k: Tensor, v: Tensor, bias: Tensor) -> Tensor:
    """SDPA with grouped K/V spelled out: the G query heads of a K/V head share one matmul (no K/V copy)."""
    batch, heads, seq, head_dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    groups = heads // kv_heads
    logits = (q.reshape(batch, kv_heads, groups * seq, head_dim) @ k.transpose(-1, -2)).float()
    logits = logits.view(batch, kv_heads, groups, seq, keys) + bias.float()[:, :, None]
    weights = logits.softmax(dim=-1).to(v.dtype).view(batch, kv_heads, groups * seq, keys)
    return (weights @ v).view(batch, heads, seq, head_dim)


def allowed_from_ar(valid: Tensor, ar: Tensor) -> Tensor:
    """openpi's make_attn_mask: query q may attend key k iff cumsum(ar)[k] <= cumsum(ar)[q], both valid."""
    cum = torch.cumsum(ar.to(torch.int64).expand_as(valid), dim=1)
    return (cum[:, None, :] <= cum[:, :, None]) & valid[:, None, :] & valid[:, :, None]
