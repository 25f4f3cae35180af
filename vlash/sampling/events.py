"""The one event type of a row's progress, from the denoise loop to the robot's reply, and the sampler's result.

A row (one request's place in a batch, or one row of a `FlowSampler` run) yields `RowEvent`s: actions
[start, stop) became final after denoise step `step`, as often as that happens, then one done event carrying its
outcome: what it sampled, or the exception that took it out (`Cancelled`, a request that failed validation). The
denoise loop (vlash.sampling.batch) yields them with model-space tensors and a `SampleResult`; the runtime
(vlash.runtime) passes the same type on in robot units with its `ChunkResult`. Torch-free: the runtime's names
import it without torch.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from torch import Tensor

# `SampleResult.final_at_step` markers (real steps are 0-based, 0..steps_run - 1).
NOT_FINAL = -1  # the run stopped early before this action reached tau == 0
PREFIX = -2  # committed prefix action: final from the start, never emitted

# a row's actions: Tensor fp32 [n, A] (the sampler, model space) or ndarray fp32 [n, J] (the runtime, robot units)
A = TypeVar("A", bound=Sized)
R = TypeVar("R")  # a finished row's outcome: SampleResult (the sampler) or ChunkResult (the runtime)


class Cancelled(Exception):
    """The outcome of a row its caller cancelled (the loop's `cancelled(row)` said so): it left its batch."""


@dataclass(frozen=True)
class RowEvent(Generic[A, R]):
    """Row `row`: actions [start, start + len(actions)) became final after denoise step `step`; or, with `result`
    set, the row is over: its outcome, or the exception that took it out. Each row's last event is its one done
    event; a row's actions come contiguously from its prefix length on and never change once yielded."""

    row: int  # index into the rows (the plan's, or the requests')
    start: int = 0  # first chunk index of `actions`
    actions: A | None = None  # None on the done event
    step: int = -1  # 0-based denoise step after which they became final; -1 on the done event
    result: R | Exception | None = None  # set on the done event

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def stop(self) -> int:
        """One past the last chunk index of `actions` (`start` on the done event)."""
        return self.start if self.actions is None else self.start + len(self.actions)


@dataclass(frozen=True)
class SampleResult:
    """A finished (or early-stopped) sampling run of one row or of rows that share their settings."""

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
