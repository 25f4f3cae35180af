"""Prepared requests -> one batched prefill and one denoise loop -> each request's events.

`PolicyRuntime` validates each request into a `PreparedRow` (its plan, model inputs, seed); `run_rows` prefills the
rows together and runs them through the denoise loop (`BatchStepper.run`: each row keeps its schedule, prefix,
guidance and early stop), and passes on the loop's `RowEvent`s in robot units: a row's final actions as they come
(postprocessed), then its done event as soon as the row finished (its `ChunkResult`), failed or was cancelled
(`cancelled(row)` is read before every step). A row that
finished or left is removed from the batch (x, times and the PrefixCache rows) where the engine can shrink a batch
(`Engine.can_shrink_batch`); an engine of static batch (`Engine.max_batch`) runs pad rows (copies of the last row)
that are evaluated and never reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import Tensor

from vlash.engines.base import Engine
from vlash.policies.pi05.model import Pi05Inputs, PrefixCache
from vlash.policies.processing.processor import Pi05Processor
from vlash.runtime.request import Cancelled, ChunkResult, RowEvent
from vlash.sampling import BatchStepper, SampleResult, SamplingPlan, stack_plans
from vlash.sampling.batch import Pace, never


@dataclass
class PreparedRow:
    """A validated request, ready to join a batch."""

    inputs: Pi05Inputs  # batch 1, on the engine's device
    plan: SamplingPlan  # one row: noise, prefix, schedule, guidance, early stop
    state: np.ndarray  # fp32 [D] planning state (postprocess converts relative actions with it)
    prefix: np.ndarray | None  # [d, J] committed actions, copied into the chunk bit-exactly
    seed: int  # the noise seed
    preprocess_s: float = 0.0  # how long preparing this request took (device-synchronized)


def run_rows(
    engine: Engine,
    processor: Pi05Processor,
    rows: Sequence[PreparedRow | Exception],
    t0: float,
    cancelled: Callable[[int], bool] = never,
    pace: Pace | None = None,
) -> Generator[RowEvent[np.ndarray, ChunkResult], None, None]:
    """The events of the prepared rows run as one batch; an Exception in `rows` is already that request's outcome
    (its done event comes first). `t0`: when the batch's preprocessing started. pace(steps) runs before the prefill
    (steps = 0) and before each pass of denoise steps (see `BatchStepper.run`)."""
    live = []
    for i, row in enumerate(rows):
        if isinstance(row, Exception):
            yield RowEvent(i, result=row)
        elif cancelled(i):
            yield RowEvent(i, result=Cancelled("cancelled before its batch ran"))
        else:
            live.append(i)
    if live:
        batch = _Batch(engine, processor, [rows[i] for i in live], t0)  # type: ignore[misc]
        for event in batch.events(lambda j: cancelled(live[j]), pace):
            yield RowEvent(live[event.row], event.start, event.actions, event.step, event.result)


class _Batch:
    """The prefill and denoise loop of the rows that entered the batch (row j = rows[j] = stepper row j; rows past
    them are a static batch's pad rows)."""

    def __init__(self, engine: Engine, processor: Pi05Processor, rows: list[PreparedRow], t0: float) -> None:
        self.engine, self.processor, self.rows, self.t0 = engine, processor, rows, t0
        self.t1 = self.t2 = t0  # prefill started, prefill ended
        self.chunks = [_empty_chunk(row, processor.action_dims) for row in rows]
        self.model_rows = [_model_rows(row) for row in rows]  # each row's final model-space rows so far (CPU)
        self.post_s = [0.0] * len(rows)
        self.first_s: list[float | None] = [None] * len(rows)
        self._cache: PrefixCache | None = None  # the prefill's, every row
        self._selected: PrefixCache | None = None  # its rows of x
        self._selected_for: Tensor | None = None  # the stepper's x_index `_selected` was taken with

    def events(
        self, cancelled: Callable[[int], bool], pace: Pace | None
    ) -> Generator[RowEvent[np.ndarray, ChunkResult], None, None]:
        """The loop's events of these rows (row j), in robot units: final actions postprocessed, a finished row's
        ChunkResult; a cancelled row's done event as the loop gave it."""
        engine, size, n = self.engine, self.engine.max_batch, len(self.rows)
        pad = 0 if size is None else size - n
        self.t1 = time.perf_counter()
        if pace is not None:
            pace(0)
        self._cache = self._selected = engine.prefill(_batch_inputs([r.inputs for r in self.rows], pad))
        engine.synchronize()
        self.t2 = time.perf_counter()
        plans = [r.plan for r in self.rows]
        stepper = BatchStepper(
            stack_plans(plans + plans[-1:] * pad), engine.synchronize, engine.can_shrink_batch, shared_time=True
        )
        stepper.drop(range(n, n + pad))  # the pad rows: evaluated with the others, never reported
        spans = (lambda span: engine.denoise_span(span, self._cache_of(stepper)), engine.span_granularity)
        velocity = lambda x, tau: engine.denoise_step(x, tau, self._cache_of(stepper))
        for event in stepper.run(velocity, spans if spans[1] else None, lambda j: j < n and cancelled(j), pace):
            if not event.done:
                yield self._final(event)
            elif isinstance(event.result, SampleResult):
                yield RowEvent(event.row, result=self._result(event.row, event.result))
            else:  # Cancelled
                yield RowEvent(event.row, result=event.result)

    def _cache_of(self, stepper: BatchStepper) -> PrefixCache:
        """The PrefixCache rows of x's rows (selected again only when they changed, with the stepper's index)."""
        assert self._cache is not None and self._selected is not None
        index = stepper.x_index
        if index is not self._selected_for:
            assert index is not None  # x lost rows
            self._selected = self._cache.select(index.to(self._cache.keys.device))
            self._selected_for = index
        return self._selected

    def _final(self, final: RowEvent[Tensor, SampleResult]) -> RowEvent[np.ndarray, ChunkResult]:
        """Model-space actions that became final -> robot units, written into the row's chunk. The processor gets every
        final row before them (the committed prefix included) as context, as in the whole chunk: a policy that plans
        velocities in another space (PlanarArmVelocityTaskSpace) maps row i at the state rows [0, i) lead to, so a
        piece converted on its own from the planning state would be mapped as if it ran first."""
        assert final.actions is not None
        j, start = final.row, time.perf_counter()
        model = self.model_rows[j]
        model[final.start : final.stop] = final.actions.detach().float().cpu()
        state = self.rows[j].state[None]
        actions = self.processor.postprocess(model[None, : final.stop], state, first=final.start)[0].astype(np.float32)
        self.chunks[j][final.start : final.stop] = actions
        now = time.perf_counter()
        self.post_s[j] += now - start
        if self.first_s[j] is None:
            self.first_s[j] = now - self.t0
        return RowEvent(j, final.start, actions, final.step)

    def _result(self, j: int, run: SampleResult) -> ChunkResult:
        timing = {
            "preprocess_ms": self.rows[j].preprocess_s * 1e3,
            "prefill_ms": (self.t2 - self.t1) * 1e3,
            "postprocess_ms": self.post_s[j] * 1e3,
            "first_action_ms": (self.first_s[j] or 0.0) * 1e3,
            "total_ms": (time.perf_counter() - self.t0) * 1e3,
        }
        step_ms = [s * 1e3 for s in run.step_times_s]
        final_at = run.final_at_step.cpu().numpy()
        seed, rows = self.rows[j].seed, len(self.rows)
        return ChunkResult(self.chunks[j], final_at, run.steps_run, run.num_final, seed, timing, step_ms, rows)


def _empty_chunk(row: PreparedRow, action_dims: int) -> np.ndarray:
    """[H, J] NaN (rows never sampled stay NaN) with the committed prefix copied in bit-exactly."""
    chunk = np.full((row.plan.x0.shape[1], action_dims), np.nan, np.float32)
    if row.prefix is not None and len(row.prefix):
        chunk[: len(row.prefix)] = row.prefix
    return chunk


def _model_rows(row: PreparedRow) -> Tensor:
    """fp32 [H, A] on the CPU: the committed prefix as the plan holds it (normalized, padded) at [0, d), zeros after
    (each event's final rows are written in as they come)."""
    d = row.plan.prefix_lens[0]
    rows = torch.zeros(row.plan.x0.shape[1:], dtype=torch.float32)
    if d:
        rows[:d] = row.plan.x0[0, :d].float().cpu()
    return rows


def _batch_inputs(parts: list[Pi05Inputs], pad: int) -> Pi05Inputs:
    """The rows' model inputs as one batch, with `pad` copies of the last row (a static batch's pad rows); one row
    without padding as it is."""
    if len(parts) == 1 and not pad:
        return parts[0]
    rows = parts + parts[-1:] * pad
    return Pi05Inputs(**{f.name: torch.cat([getattr(row, f.name) for row in rows]) for f in fields(Pi05Inputs)})
