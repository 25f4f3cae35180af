"""The velocity-function interface the sampler consumes, and its checked evaluation."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from vlash.errors import ShapeError

# velocity_fn(x_t fp32 [B, H, A], tau fp32 [B, H]) -> v [B, H, A] (any float dtype), v ≈ eps - a. Run with
# `shared_time`, it also gets tau [B, 1] (one time for all of a row's tokens) at steps where that holds.
# The caller closes over the prefix KV cache; for guided RTC it must be differentiable in x_t.
VelocityFn = Callable[[Tensor, Tensor], Tensor]


def eval_velocity(velocity_fn: VelocityFn, x: Tensor, tau: Tensor) -> Tensor:
    """Call `velocity_fn(x, tau)`, check the shape and return v as fp32 (ValueError if misshapen)."""
    v = velocity_fn(x, tau)
    if not isinstance(v, Tensor) or v.shape != x.shape:
        got = tuple(v.shape) if isinstance(v, Tensor) else type(v).__name__
        raise ShapeError(f"velocity_fn must return a tensor of shape {tuple(x.shape)}, got {got}")
    if not v.is_floating_point():
        raise ValueError(f"velocity_fn must return a float tensor, got dtype {v.dtype}")
    return v.float()
