"""Engine-independent Euler flow sampler with per-token time, prefix clamp, streaming, RTC.

Convention (docs/METHODS.md "Flow sampling"): t = 1 noise, t = 0 data, v ≈ eps - a. Step k moves every token
from tau_k to tau_{k+1}: x <- x + (tau_{k+1} - tau_k) * v(x, tau_k), always in fp32. With the
constant schedule and no prefix this is exactly openpi's x <- x - v(x, t) / N. `FlowSampler` runs the rows of one
noise tensor with shared settings; it builds a `SamplingPlan` and steps it with `vlash.sampling.batch.BatchStepper`,
which also runs batched requests whose rows differ in settings.

Usage:
    run = FlowSampler(SamplerConfig(schedule="horizon-aware")).start(velocity_fn, noise)
    for event in run:          # RowEvent per row of the noise: final actions, contiguous from index prefix_len
        if not event.done:
            send(event.row, event.start, event.actions)
    result = run.result        # SampleResult of every row
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

import torch
from torch import Tensor

from vlash.sampling.batch import BatchStepper, SpanFn
from vlash.sampling.events import RowEvent, SampleResult
from vlash.sampling.plan import SamplerConfig, SamplingPlan, make_plan, tau_grid_f64
from vlash.sampling.velocity import VelocityFn


class SamplingRun(Iterator[RowEvent[Tensor, SampleResult]]):
    """An in-progress sampling run: iterate it for its rows' `RowEvent`s (the rows finish together, at the same
    step); once exhausted, `result` holds the SampleResult of every row."""

    def __init__(self, steps: Generator[RowEvent[Tensor, SampleResult], None, SampleResult]) -> None:
        self._steps = steps
        self._result: SampleResult | None = None

    def __iter__(self) -> SamplingRun:
        return self

    def __next__(self) -> RowEvent[Tensor, SampleResult]:
        try:
            return next(self._steps)
        except StopIteration as stop:
            self._result = stop.value
            raise

    @property
    def done(self) -> bool:
        """True once every step has run."""
        return self._result is not None

    @property
    def result(self) -> SampleResult:
        """The run's result; RuntimeError while steps remain (iterate it or call `drain`)."""
        if self._result is None:
            raise RuntimeError("SamplingRun not finished: iterate it to the end or call drain()")
        return self._result

    def drain(self) -> SampleResult:
        """Run the remaining steps, discarding their events, and return the result."""
        for _ in self:
            pass
        return self.result

    def close(self) -> None:
        """Abandon the run (no further steps run)."""
        self._steps.close()


class FlowSampler:
    """Euler flow sampler, independent of the engine that evaluates the velocity; all rows share its settings."""

    def __init__(self, config: SamplerConfig | None = None) -> None:
        self.config = config if config is not None else SamplerConfig()

    def tau_grid(self, horizon: int, prefix_len: int = 0) -> Tensor:
        """The fp32 [N + 1, H] per-token time grid this sampler integrates along (final_tau snapped)."""
        return tau_grid_f64(self.config, horizon, prefix_len).float()

    def plan(
        self,
        noise: Tensor,
        prefix: Tensor | None = None,
        guidance_target: Tensor | None = None,
        guidance_delay: int | None = None,
    ) -> SamplingPlan:
        """Validate the inputs (ValueError, see `start`) and build the plan of `noise`'s rows with these settings.
        Plans of samplers with other settings (schedule, prefix, guidance, early stop) stack into one batch with
        `stack_plans` and run through `BatchStepper`."""
        return make_plan(self.config, noise, prefix, guidance_target, guidance_delay)

    def start(
        self,
        velocity_fn: VelocityFn,
        noise: Tensor,
        prefix: Tensor | None = None,
        guidance_target: Tensor | None = None,
        guidance_delay: int | None = None,
        synchronize: Callable[[], object] | None = None,
        shared_time: bool = False,
        spans: tuple[SpanFn, str] | None = None,
    ) -> SamplingRun:
        """Validate the inputs (ValueError) and return a lazy run; nothing is evaluated yet.

        velocity_fn(x fp32 [B, H, A], tau fp32 [B, H]) -> v [B, H, A]; noise: [B, H, A] (ignored
        at prefix positions); prefix: committed actions [B, d, A] with d < H, held at tau = 0 and
        copied into the output bit-exactly (as fp32). guidance_target: the previous chunk's
        leftover aligned to this chunk's indices, [B, H, A]; needs `config.guidance` and turns
        guided RTC on (None: unguided, e.g. the first chunk). guidance_delay: d of the RTC mask,
        defaults to the prefix length. synchronize: called before every clock read (e.g.
        torch.cuda.synchronize) so step timings cover the device work. shared_time: velocity_fn also takes
        tau [B, 1] (every vlash Engine's denoise_step does), passed at steps where all tokens share one time (the
        constant schedule without a prefix), so the model conditions once per row instead of once per token.
        spans: (run_span, granularity) of an engine with static programs (`Engine.denoise_span`,
        `Engine.span_granularity`): unguided steps run as spans, one step each ("step") or up to the next that
        streams actions ("chunk").
        """
        plan = self.plan(noise, prefix, guidance_target, guidance_delay)
        return SamplingRun(_steps(plan, velocity_fn, synchronize, shared_time, spans))

    def sample(
        self,
        velocity_fn: VelocityFn,
        noise: Tensor,
        prefix: Tensor | None = None,
        guidance_target: Tensor | None = None,
        guidance_delay: int | None = None,
        synchronize: Callable[[], object] | None = None,
        shared_time: bool = False,
    ) -> SampleResult:
        """Run all steps (or until the early stop) and return the result: `start(...).drain()`."""
        run = self.start(velocity_fn, noise, prefix, guidance_target, guidance_delay, synchronize, shared_time)
        return run.drain()


def _steps(
    plan: SamplingPlan,
    velocity_fn: VelocityFn,
    synchronize: Callable[[], object] | None,
    shared_time: bool,
    spans: tuple[SpanFn, str] | None = None,
) -> Generator[RowEvent[Tensor, SampleResult], None, SampleResult]:
    """A plan whose rows share their settings: every step finalizes the same indices of every row, and the rows
    finish together (the denoise loop of `BatchStepper.run`); their results stacked into one."""
    sync = synchronize if synchronize is not None else _no_sync
    stepper = BatchStepper(plan, sync, shared_time=shared_time)
    sync()  # work queued before the run is not counted in its first step
    rows: list[SampleResult] = []
    for event in stepper.run(velocity_fn, spans):
        if isinstance(event.result, SampleResult):
            rows.append(event.result)
        yield event
    actions = torch.cat([r.actions for r in rows])  # a copy: the rows' actions are views of the stepper's x
    first = rows[0]
    return SampleResult(actions, first.steps_run, first.step_times_s, first.final_at_step, first.prefix_len)


def _no_sync() -> None:
    return None
