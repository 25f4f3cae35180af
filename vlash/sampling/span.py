"""A span of consecutive Euler steps, as one unit of work an engine can run without Python between the steps.

`BatchStepper` hands an engine a `StepSpan` (the rows' state before the span and, per step, the per-token times and
steps) and gets back x after the span; `StepSpan.run` is the loop itself, the same code whether it runs step by step
through `Engine.denoise_step` or inside one captured CUDA graph (vlash.engines.static_program), so both give the same
numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

# step_fn(x fp32 [n, H, A], tau fp32 [n, H] or [n, 1]) -> v [n, H, A] (any float dtype)
StepFn = Callable[[Tensor, Tensor], Tensor]


def euler_update(x: Tensor, v: Tensor, dtau: Tensor, held: tuple[Tensor, Tensor] | None) -> Tensor:
    """The Euler step of every row, x + (tau_{k+1} - tau_k) * v in fp32, committed prefix positions re-clamped.

    x, v: fp32 [B, H, A]; dtau: fp32 [B, H]; held: bool [B, H] positions and fp32 [B, H, A] values copied there
    bit-exactly (None: no row has a prefix, nothing to clamp).
    """
    x = x + dtau[..., None] * v
    return x if held is None else torch.where(held[0][..., None], held[1], x)


@dataclass(frozen=True)
class StepSpan:
    """Steps [first, first + len(shared)) of a plan, for the rows of x."""

    first: int  # the plan's index of the span's first step
    x: Tensor  # fp32 [n, H, A]: the rows before the span
    taus: Tensor  # fp32 [K, n, H]: per-token time at each of the K steps
    dtaus: Tensor  # fp32 [K, n, H]: per-token Euler step at each
    shared: tuple[bool, ...]  # per step: every token of a row shares one time (the model gets tau [n, 1])
    held: tuple[Tensor, Tensor] | None  # committed prefix: positions bool [n, H], values fp32 [n, H, A]; None: none

    @property
    def steps(self) -> int:
        return len(self.shared)

    def run(self, step_fn: StepFn) -> Tensor:
        """x after the span's steps (fp32 [n, H, A]): v = step_fn(x, tau), then the Euler update, per step."""
        x = self.x
        for k, shared in enumerate(self.shared):
            tau = self.taus[k][:, :1] if shared else self.taus[k]
            x = euler_update(x, step_fn(x, tau).float(), self.dtaus[k], self.held)
        return x
