"""The Euler stepping of a plan's rows, one batched velocity evaluation per step (docs/METHODS.md "Flow sampling"), and
the denoise loop every sampling run goes through, one row or a batch alike, whoever evaluates the velocity.

Each row follows its own per-token times, committed prefix, guided-RTC target and early stop; all rows take step k
together. A row leaves once it ran its last step (or is dropped by the caller, e.g. a cancelled request); with
`shrink` it also leaves x, so later steps evaluate fewer rows. `FlowSampler` (rows sharing their settings) and the
runtime's batched requests both step through `BatchStepper.run`, which yields each row's `RowEvent`s.

Usage:
    stepper = BatchStepper(stack_plans([plan_a, plan_b]))
    for event in stepper.run(velocity_fn, cancelled=lambda row: gone[row]):
        event.row, event.start, event.actions   # newly final actions of a row (velocity_fn sees stepper.x_rows)
        event.done, event.result                # a row that finished (SampleResult) or was dropped (Cancelled)

Each pass `run` drops the rows `cancelled` names (their done event at once, before any more work is spent on them),
then runs the next step, or the next span of steps when the engine takes spans (`Engine.span_granularity`: "step",
or "chunk" up to the next step that streams something): an engine that runs several steps as one unit (a captured
CUDA graph) takes them as a `StepSpan`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from vlash.sampling.events import NOT_FINAL, Cancelled, RowEvent, SampleResult
from vlash.sampling.guidance import guided_velocity
from vlash.sampling.plan import SamplingPlan
from vlash.sampling.span import StepSpan, euler_update
from vlash.sampling.velocity import VelocityFn, eval_velocity

SpanFn = Callable[[StepSpan], Tensor]  # runs a span's steps, returns x after them (fp32 [n, H, A])
Pace = Callable[[int], None]  # pace(steps): called before each pass with the steps it runs (emulated device time)


def never(row: int) -> bool:
    return False


@dataclass(frozen=True)
class _XRows:
    """The plan's per-row tensors for the rows of x, sliced once whenever x's rows change (not at every step)."""

    taus: Tensor  # fp32 [N + 1, n, H]
    dtaus: Tensor  # fp32 [N, n, H]
    held: tuple[Tensor, Tensor] | None  # bool [n, H] prefix positions, fp32 [n, H, A] values; None: no prefix
    guidance: tuple[Tensor, Tensor, Tensor] | None  # target [n, H, A], mask [n, H], weights [N, n]; None: unguided

    @classmethod
    def of(cls, plan: SamplingPlan, rows: list[int], index: Tensor | None) -> _XRows:
        """`index`: the rows as an index on the plan's device; None: every plan row, in order (no copy)."""

        def take(value: Tensor, dim: int = 0) -> Tensor:
            return value if index is None else value.index_select(dim, index)

        held = (take(plan.held), take(plan.x0)) if any(plan.prefix_lens[r] for r in rows) else None
        guidance = None
        if any(plan.guided[r] for r in rows):
            assert plan.guidance_target is not None and plan.guidance_mask is not None
            assert plan.guidance_weights is not None
            guidance = (take(plan.guidance_target), take(plan.guidance_mask), take(plan.guidance_weights, 1))
        return cls(take(plan.taus, 1), take(plan.dtaus, 1), held, guidance)


class BatchStepper:
    """Runs the Euler steps of a plan's rows; see the module docstring."""

    def __init__(
        self,
        plan: SamplingPlan,
        synchronize: Callable[[], object] | None = None,
        shrink: bool = True,
        shared_time: bool = False,
    ) -> None:
        """synchronize: called before the clock read that ends a step (e.g. torch.cuda.synchronize). shrink: False
        keeps every row in x to the end (an engine of static batch); finished and dropped rows are then still
        evaluated but no longer reported. shared_time: velocity_fn also takes tau [n, 1], one time per row (every
        vlash Engine does); steps at which every row's tokens share one time (`plan.shared_time`) pass that, so the
        model conditions each row once instead of once per token. False: always per-token tau [n, H]."""
        self.plan = plan
        self.shrink = shrink
        self.shared_time = shared_time
        self.active: list[int] = list(range(plan.batch))  # plan rows still running, in order
        self.x_rows: list[int] = list(self.active)  # the plan row of each row of x
        self.x_index: Tensor | None = None  # x_rows as an int64 index on the plan's device; None: every plan row
        # fp32 [len(x_rows), H, A]. Every step replaces x (never writes it in place), so views of it stay valid.
        self.x = plan.x0
        self.step_index = 0  # the next step to run
        self.step_times_s: list[float] = []  # per step run (synchronized)
        self._sync = synchronize
        self._xrows = _XRows.of(plan, self.x_rows, None)
        self._position = {row: i for i, row in enumerate(self.x_rows)}  # plan row -> its row of x
        self._emitted = list(plan.prefix_lens)
        self._frontier = plan.frontier.tolist()  # [N][B]

    @property
    def done(self) -> bool:
        """True once no row is left running."""
        return not self.active

    def drop(self, rows: Iterable[int]) -> None:
        """Take plan rows out of the run (nothing more is reported for them)."""
        gone = set(rows)
        if not gone:
            return
        self.active = [r for r in self.active if r not in gone]
        if not self.shrink or self.active == self.x_rows:
            return
        if not self.active:  # the last row left: nothing is evaluated again
            self.x, self.x_rows, self.x_index, self._position = self.x[:0], [], None, {}
            return
        device = self.x.device
        keep = torch.tensor([self._position[r] for r in self.active], dtype=torch.int64, device=device)
        self.x = self.x.index_select(0, keep)
        self.x_rows = list(self.active)
        self.x_index = torch.tensor(self.x_rows, dtype=torch.int64, device=device)
        self._xrows = _XRows.of(self.plan, self.x_rows, self.x_index)
        self._position = {row: i for i, row in enumerate(self.x_rows)}

    def _velocity(self, velocity_fn: VelocityFn, tau: Tensor, k: int) -> Tensor:
        guidance = self._xrows.guidance
        if guidance is not None:  # one guided row: the whole batch guided (through autograd with vjp)
            target, mask, weights = guidance
            return guided_velocity(velocity_fn, self.x, tau, target, mask, weights[k], self.plan.guidance_vjp)
        with torch.no_grad():
            return eval_velocity(velocity_fn, self.x, tau)

    @staticmethod
    def clock() -> float:
        """The clock step times are measured on (time.perf_counter)."""
        return time.perf_counter()

    @property
    def guided(self) -> bool:
        """Whether a row of x runs guided RTC (its steps need autograd: one `step` at a time, no spans)."""
        return self._xrows.guidance is not None

    def run(
        self,
        velocity: VelocityFn,
        spans: tuple[SpanFn, str] | None = None,
        cancelled: Callable[[int], bool] = never,
        pace: Pace | None = None,
    ) -> Generator[RowEvent[Tensor, SampleResult], None, None]:
        """Run to the end, yielding every row's events (see the module docstring). velocity(x, tau) is evaluated on
        the rows of `x_rows`; spans: (run_span, granularity) of an engine that takes spans; a guided row (RTC needs
        autograd at every step) runs step by step whatever the engine. pace(steps) runs before each pass and counts in
        its steps' time."""
        while not self.done:
            gone = [row for row in self.active if cancelled(row)]
            if gone:
                self.drop(gone)
                for row in gone:
                    yield RowEvent(row, result=Cancelled("cancelled while its batch ran"))
                continue
            use_spans = spans is not None and not self.guided
            steps = self.steps_to_next_report() if use_spans and spans[1] == "chunk" else 1
            started = self.clock()
            if pace is not None:
                pace(steps)
            if use_spans:
                yield from self.step_span(spans[0], steps, started)
            else:
                yield from self.step(velocity, started)

    def step(self, velocity_fn: VelocityFn, started: float | None = None) -> list[RowEvent[Tensor, SampleResult]]:
        """Run the next step on the rows of `x_rows` (velocity_fn gets x and tau of exactly those rows) and return
        its events: newly final actions in row order, then the rows it ended. started: the time.perf_counter() the
        step's time counts from (e.g. before the caller's per-step work); None: now."""
        if self.done:
            raise RuntimeError("BatchStepper.step: no row is left running")
        xrows, k = self._xrows, self.step_index
        t0 = time.perf_counter() if started is None else started
        tau = xrows.taus[k][:, :1] if self.shared_time and self.plan.shared_time[k] else xrows.taus[k]
        v = self._velocity(velocity_fn, tau, k)
        self.x = euler_update(self.x, v, xrows.dtaus[k], xrows.held)
        self._clock(t0, 1)
        return self._report(k, done_possible=True)

    def steps_to_next_report(self) -> int:
        """Steps from the next one up to and including the first that reports something: a running row's first
        final actions (time to first action) or a row's last step. A span this long loses no streaming latency."""
        if self.done:
            raise RuntimeError("BatchStepper.steps_to_next_report: no row is left running")
        first = self.step_index
        for k in range(first, self.plan.num_steps):
            for row in self.active:
                first_finals = self._emitted[row] == self.plan.prefix_lens[row] < self._frontier[k][row]
                if first_finals or k >= self.plan.last_step[row]:
                    return k - first + 1
        return self.plan.num_steps - first

    def step_span(
        self, run_span: SpanFn, steps: int, started: float | None = None
    ) -> list[RowEvent[Tensor, SampleResult]]:
        """Run the next `steps` steps as one `StepSpan` through `run_span` (at most `steps_to_next_report()`, and no
        guided row); the events of each step in turn, as `step` would have given them (each step's time: the span's
        share)."""
        if self.done:
            raise RuntimeError("BatchStepper.step_span: no row is left running")
        if self.guided:
            raise ValueError("guided RTC needs autograd at every step: run it with step(), not step_span()")
        if not 1 <= steps <= self.steps_to_next_report():
            raise ValueError(f"a span covers 1..{self.steps_to_next_report()} steps here, got {steps}")
        xrows, first = self._xrows, self.step_index
        t0 = time.perf_counter() if started is None else started
        shared = tuple(self.shared_time and self.plan.shared_time[k] for k in range(first, first + steps))
        span = StepSpan(
            first, self.x, xrows.taus[first : first + steps], xrows.dtaus[first : first + steps], shared, xrows.held
        )
        x = run_span(span)
        if x.shape != self.x.shape or x.dtype != torch.float32:
            raise ValueError(
                f"a span must return fp32 x of shape {tuple(self.x.shape)}, got {x.dtype} {tuple(x.shape)}"
            )
        self.x = x
        self._clock(t0, steps)
        return [event for k in range(first, first + steps) for event in self._report(k, k == first + steps - 1)]

    def _clock(self, t0: float, steps: int) -> None:
        """Advance by `steps` steps that took from t0 until now (device-synchronized), each its share."""
        if self._sync is not None:
            self._sync()
        share = (time.perf_counter() - t0) / steps
        self.step_times_s.extend([share] * steps)
        self.step_index += steps

    def _report(self, k: int, done_possible: bool) -> list[RowEvent[Tensor, SampleResult]]:
        """What step k made final, then which rows it ended (only at a span's last step: a span never passes a row's
        last step), from x after it (a final action never changes again)."""
        finals: list[RowEvent[Tensor, SampleResult]] = []
        done: list[RowEvent[Tensor, SampleResult]] = []
        for row in self.active:
            i, start, stop = self._position[row], self._emitted[row], self._frontier[k][row]
            if stop > start:
                finals.append(RowEvent(row, start, self.x[i, start:stop].clone(), k))
                self._emitted[row] = stop
            if k >= self.plan.last_step[row]:
                assert done_possible, "a span ran past a row's last step"
                done.append(RowEvent(row, result=self._result(row, i, k + 1)))
        if done:
            self.drop(event.row for event in done)
        return finals + done

    def _result(self, row: int, i: int, steps_run: int) -> SampleResult:
        final_at = self.plan.final_at_step[row].clone()
        final_at[final_at >= steps_run] = NOT_FINAL
        actions = self.x[i : i + 1]  # a view, not a copy: x is replaced by the next step, never written in place
        return SampleResult(actions, steps_run, self.step_times_s[:steps_run], final_at, self.plan.prefix_lens[row])
