"""What the flow sampler hands back: streamed final actions and the finished chunk."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

# `SampleResult.final_at_step` markers (real steps are 0-based, 0..steps_run - 1).
NOT_FINAL = -1  # the run stopped early before this action reached tau == 0
PREFIX = -2  # committed prefix action: final from the start, never emitted


@dataclass(frozen=True)
class FinalActions:
    """Actions [start, stop) of the chunk that became final (tau == 0) at step `step`.

    Runs of a sampler yield these contiguously: the first starts at prefix_len and each starts
    where the previous stopped. Values never change after they are yielded.
    """

    start: int  # first chunk index in this batch of actions (inclusive)
    stop: int  # last chunk index (exclusive)
    actions: Tensor  # fp32 [B, stop - start, A], on the noise's device
    step: int  # 0-based Euler step after which these became final
    elapsed_s: float  # wall seconds from the run's first step to the end of this one (consumer time included)


@dataclass(frozen=True)
class SampleResult:
    """A finished (or early-stopped) sampling run."""

    actions: Tensor  # fp32 [B, H, A]; indices not final at an early stop hold their partial state
    steps_run: int  # Euler steps actually run (< num_steps after an early stop)
    step_times_s: list[float]  # per-step seconds (synchronized), len == steps_run; excludes consumer time
    final_at_step: Tensor  # int64 [H]: step at which each index became final, NOT_FINAL or PREFIX
    prefix_len: int  # d: committed prefix actions at indices [0, d), copied bit-exactly

    @property
    def num_final(self) -> int:
        """Number of leading indices (prefix included) that are final."""
        final = (self.final_at_step != NOT_FINAL).int()
        return int(final.cumprod(0).sum())
