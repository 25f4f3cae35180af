"""The Euler stepping of a plan's rows, one batched velocity evaluation per step (docs/METHODS.md "Flow sampling").

Each row follows its own per-token times, committed prefix, guided-RTC target and early stop; all rows take step k
together. A row leaves once it ran its last step (or is dropped by the caller, e.g. a cancelled request); with
`shrink` it also leaves x, so later steps evaluate fewer rows. `FlowSampler` (rows sharing their settings) and the
runtime's batched requests both step through `BatchStepper`.

Usage:
    stepper = BatchStepper(stack_plans([plan_a, plan_b]))
    while not stepper.done:
        report = stepper.step(velocity_fn)   # velocity_fn sees the rows of stepper.x_rows, in that order
        report.finals, report.done           # RowFinal: newly final actions; RowDone: rows that finished
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from vlash.sampling.guidance import guided_velocity
from vlash.sampling.plan import SamplingPlan
from vlash.sampling.results import NOT_FINAL, SampleResult
from vlash.sampling.velocity import VelocityFn, eval_velocity


def euler_update(x: Tensor, v: Tensor, dtau: Tensor, held: Tensor, held_values: Tensor) -> Tensor:
    """The Euler step of every row, x + (tau_{k+1} - tau_k) * v in fp32, committed prefix positions re-clamped.

    x, v: fp32 [B, H, A]; dtau: fp32 [B, H]; held: bool [B, H]; held_values: fp32 [B, H, A] (copied bit-exactly).
    """
    x = x + dtau[..., None] * v
    return torch.where(held[..., None], held_values, x)


@dataclass(frozen=True)
class RowFinal:
    """Actions [start, stop) of plan row `row` became final (tau == 0) at step `step`."""

    row: int  # index into the plan's rows
    start: int  # first chunk index (inclusive); the first of a row starts at its prefix length
    stop: int  # last chunk index (exclusive); the next of the row starts here
    actions: Tensor  # fp32 [stop - start, A]
    step: int  # 0-based Euler step


@dataclass(frozen=True)
class RowDone:
    """Plan row `row` ran its last step (its early stop, or step N - 1)."""

    row: int  # index into the plan's rows
    result: SampleResult  # the row's run: actions [1, H, A], its steps and their times


@dataclass(frozen=True)
class StepReport:
    """What one step changed."""

    step: int  # 0-based Euler step
    finals: list[RowFinal]  # rows whose leading final actions grew, in row order
    done: list[RowDone]  # rows that finished at this step, in row order; they left the batch


class BatchStepper:
    """Runs the Euler steps of a plan's rows; see the module docstring."""

    def __init__(
        self, plan: SamplingPlan, synchronize: Callable[[], object] | None = None, shrink: bool = True
    ) -> None:
        """synchronize: called before the clock read that ends a step (e.g. torch.cuda.synchronize). shrink: False
        keeps every row in x to the end (an engine of static batch); finished and dropped rows are then still
        evaluated but no longer reported."""
        self.plan = plan
        self.shrink = shrink
        self.active: list[int] = list(range(plan.batch))  # plan rows still running, in order
        self.x_rows: list[int] = list(self.active)  # the plan row of each row of x
        self.x = plan.x0  # fp32 [len(x_rows), H, A]
        self.step_index = 0  # the next step to run
        self.step_times_s: list[float] = []  # per step run (synchronized)
        self._sync = synchronize
        self._index: Tensor | None = None  # x_rows as an index on the plan's device; None: every row
        self._emitted = list(plan.prefix_lens)
        self._frontier = plan.frontier.tolist()  # [N][B]

    @property
    def done(self) -> bool:
        """True once no row is left running."""
        return not self.active

    def drop(self, rows: Iterable[int]) -> None:
        """Take plan rows out of the run (nothing more is reported for them)."""
        gone = set(rows)
        self.active = [r for r in self.active if r not in gone]
        if self.shrink and self.active != self.x_rows:
            device = self.x.device
            keep = torch.tensor([self.x_rows.index(r) for r in self.active], dtype=torch.int64, device=device)
            self.x = self.x.index_select(0, keep)
            self.x_rows = list(self.active)
            self._index = torch.tensor(self.x_rows, dtype=torch.int64, device=device)

    def _rows(self, value: Tensor) -> Tensor:
        """The x rows of a per-row plan tensor [B, ...]."""
        return value if self._index is None else value.index_select(0, self._index)

    def _velocity(self, velocity_fn: VelocityFn, tau: Tensor, k: int) -> Tensor:
        plan = self.plan
        if any(plan.guided[r] for r in self.x_rows):  # one guided row: the whole batch through autograd
            assert plan.guidance_target is not None and plan.guidance_mask is not None
            assert plan.guidance_weights is not None
            target, mask = self._rows(plan.guidance_target), self._rows(plan.guidance_mask)
            return guided_velocity(velocity_fn, self.x, tau, target, mask, self._rows(plan.guidance_weights[k]))
        with torch.no_grad():
            return eval_velocity(velocity_fn, self.x, tau)

    def step(self, velocity_fn: VelocityFn) -> StepReport:
        """Run the next step on the rows of `x_rows` (velocity_fn gets x and tau of exactly those rows)."""
        if self.done:
            raise RuntimeError("BatchStepper.step: no row is left running")
        plan, k = self.plan, self.step_index
        t0 = time.perf_counter()
        v = self._velocity(velocity_fn, self._rows(plan.taus[k]), k)
        held, held_values = self._rows(plan.held), self._rows(plan.x0)
        self.x = euler_update(self.x, v, self._rows(plan.dtaus[k]), held, held_values)
        if self._sync is not None:
            self._sync()
        self.step_times_s.append(time.perf_counter() - t0)
        self.step_index += 1
        finals, done = [], []
        for row in self.active:
            i, start, stop = self.x_rows.index(row), self._emitted[row], self._frontier[k][row]
            if stop > start:
                finals.append(RowFinal(row, start, stop, self.x[i, start:stop].clone(), k))
                self._emitted[row] = stop
            if k >= plan.last_step[row]:
                done.append(RowDone(row, self._result(row, i, k + 1)))
        if done:
            self.drop(d.row for d in done)
        return StepReport(k, finals, done)

    def _result(self, row: int, i: int, steps_run: int) -> SampleResult:
        final_at = self.plan.final_at_step[row].clone()
        final_at[final_at >= steps_run] = NOT_FINAL
        actions = self.x[i : i + 1].clone()
        return SampleResult(actions, steps_run, self.step_times_s[:steps_run], final_at, self.plan.prefix_lens[row])
