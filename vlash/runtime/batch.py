"""Prepared requests -> one batched prefill and one batched denoise loop -> a chunk per request.

`PolicyRuntime` validates each request into a `PreparedRow` (its plan, model inputs, seed); `run_rows` prefills the
rows together, steps them together with `vlash.sampling.BatchStepper` (each row keeps its schedule, prefix, guidance
and early stop), streams each row's final actions as they come and each row's outcome (`BatchDone`) as soon as the
row finished or failed, and ends with one outcome per request, in order: a `ChunkResult`, or the exception that took
the row out (its validation, or its row hook). A row that finished or left is removed from the batch (x, times and
the PrefixCache rows) where the engine can shrink a batch (`Engine.can_shrink_batch`); an engine of static batch
(`Engine.max_batch`) runs pad rows (copies of the last row) that are evaluated and never reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from torch import Tensor

from vlash.engines.base import Engine
from vlash.generator_run import GeneratorRun
from vlash.policies.pi05.model import Pi05Inputs, PrefixCache
from vlash.policies.processing.processor import Pi05Processor
from vlash.sampling import BatchStepper, RowDone, RowFinal, SamplingPlan, stack_plans

# Called before prefill ("prefill") and before every denoise step ("step"): the server's hook for
# cancelling a superseded request and for emulating a slower device. It may raise to abort the request.
StageHook = Callable[[str], None]


@dataclass(frozen=True)
class ChunkPiece:
    """Actions [start, start + len(actions)) of the chunk, final after denoise step `step` (0-based)."""

    start: int
    actions: np.ndarray  # fp32 [n, J] absolute robot units
    step: int


@dataclass(frozen=True)
class ChunkResult:
    """A finished request. Rows [0, final_rows) of `actions` are the chunk; rows past them were never sampled
    (an early stop, see ChunkRequest.execution_horizon) and hold NaN."""

    actions: np.ndarray  # fp32 [H, J] absolute robot units (prefix bit-exact); rows >= final_rows are NaN
    final_at_step: np.ndarray  # int64 [H]: step after which each index was final (-2: prefix, -1: never)
    num_steps: int  # denoise steps run (fewer than the runtime's num_steps after an early stop)
    final_rows: int  # m: leading rows that are final (prefix included), >= rows_needed(request); H without early stop
    seed: int  # the noise seed used
    # preprocess_ms (this request's own), prefill_ms (the batch's, shared by its rows, its stage hook included),
    # postprocess_ms, first_action_ms and total_ms (from the start of the batch's preprocessing)
    timing_ms: dict[str, float]
    # per denoise step of the batch (device-synchronized), the step's stage hooks included
    step_ms: list[float] = field(default_factory=list)
    batch_size: int = 1  # requests that shared this one's prefill and denoise loop (1: it ran alone)


@dataclass(frozen=True)
class BatchPiece:
    """A piece of the request at index `row` of the batch."""

    row: int  # index into the requests list
    piece: ChunkPiece  # as for one request: actions [start, start + n) of that request became final


@dataclass(frozen=True)
class BatchDone:
    """The request at index `row` of the batch is over: it finished, or it failed and left the batch. Comes once
    per request, after its last piece, as soon as it is over (the other rows may still be running)."""

    row: int  # index into the requests list
    outcome: ChunkResult | Exception  # what `result[row]` will hold


BatchEvent = BatchPiece | BatchDone


class BatchStream(GeneratorRun[BatchEvent, list[ChunkResult | Exception]]):
    """An in-progress batch: iterate for `BatchPiece`s and `BatchDone`s, then read `result` (one outcome per
    request, in order)."""


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
    row_hooks: Sequence[StageHook],
    stage_hook: StageHook,
    t0: float,
) -> Generator[BatchEvent, None, list[ChunkResult | Exception]]:
    """Run the prepared rows as one batch; an Exception in `rows` is already that request's outcome (its `BatchDone`
    comes first). `t0`: when the batch's preprocessing started. See the module docstring."""
    outcomes: list[ChunkResult | Exception | None] = [r if isinstance(r, Exception) else None for r in rows]
    for i, outcome in enumerate(outcomes):
        if outcome is not None:
            yield BatchDone(i, outcome)
    live = [i for i, r in enumerate(rows) if isinstance(r, PreparedRow)]
    if live:
        t1 = time.perf_counter()
        failed = _call_hooks("prefill", live, row_hooks, stage_hook)
        paused = time.perf_counter()
        for i, exc in failed.items():
            outcomes[i] = exc
            yield BatchDone(i, exc)
        t1 += time.perf_counter() - paused  # the prefill's time leaves out the consumer's
        live = [i for i in live if i not in failed]
    if live:
        prepared = [r for r in (rows[i] for i in live) if isinstance(r, PreparedRow)]
        batch = _Batch(engine, processor, prepared, [row_hooks[i] for i in live], stage_hook, (t0, t1))
        for j, item in batch.steps():
            if isinstance(item, ChunkPiece):
                yield BatchPiece(live[j], item)
            else:
                outcomes[live[j]] = item
                yield BatchDone(live[j], item)
    assert all(o is not None for o in outcomes)
    return outcomes  # type: ignore[return-value]


def _call_hooks(
    stage: str, rows: Sequence[int], row_hooks: Sequence[StageHook], stage_hook: StageHook, times: int = 1
) -> dict[int, Exception]:
    """The batch's stage hook `times` times (once per step of a span; an exception aborts the batch), then each row's
    hook once: the rows whose hook raised."""
    for _ in range(times):
        stage_hook(stage)
    failed: dict[int, Exception] = {}
    for row in rows:
        try:
            row_hooks[row](stage)
        except Exception as exc:  # noqa: BLE001 - the row's outcome (e.g. the server cancelled it)
            failed[row] = exc
    return failed


class _Batch:
    """The prefill and denoise loop of the rows that entered the batch (row j = prepared[j] = stepper row j; rows
    past them are a static batch's pad rows)."""

    def __init__(
        self,
        engine: Engine,
        processor: Pi05Processor,
        rows: list[PreparedRow],
        row_hooks: list[StageHook],
        stage_hook: StageHook,
        clocks: tuple[float, float],
    ) -> None:
        self.engine, self.processor, self.rows = engine, processor, rows
        self.row_hooks, self.stage_hook = row_hooks, stage_hook
        self.t0, self.t1 = clocks  # preprocessing started, prefill started (its stage hook included)
        self.t2 = self.t1  # prefill ended
        self.chunks = [_empty_chunk(row, processor.action_dims) for row in rows]
        self.post_s = [0.0] * len(rows)
        self.first_s: list[float | None] = [None] * len(rows)
        self._cache: PrefixCache | None = None  # the prefill's, every row
        self._selected: PrefixCache | None = None  # its rows of x
        self._selected_for: Tensor | None = None  # the stepper's x_index `_selected` was taken with

    def steps(self) -> Generator[tuple[int, ChunkPiece | ChunkResult | Exception], None, None]:
        """(row, piece) as the rows' actions become final, and (row, outcome) once a row is over."""
        engine, size, n = self.engine, self.engine.max_batch, len(self.rows)
        pad = 0 if size is None else size - n
        self._cache = self._selected = engine.prefill(_batch_inputs([r.inputs for r in self.rows], pad))
        engine.synchronize()
        self.t2 = time.perf_counter()
        plans = [r.plan for r in self.rows]
        stepper = BatchStepper(
            stack_plans(plans + plans[-1:] * pad), engine.synchronize, engine.can_shrink_batch, shared_time=True
        )
        stepper.drop(range(n, n + pad))  # the pad rows: evaluated with the others, never reported
        granularity = engine.span_granularity
        while not stepper.done:
            spans = granularity is not None and not stepper.guided  # guided RTC: autograd, one step at a time
            steps = stepper.steps_to_next_report() if spans and granularity == "chunk" else 1
            started = time.perf_counter()  # the steps' time includes their stage hooks
            failed = _call_hooks("step", stepper.active, self.row_hooks, self.stage_hook, steps)
            if failed:
                stepper.drop(failed)
                paused = time.perf_counter()
                yield from failed.items()
                started += time.perf_counter() - paused  # but not the consumer's time
                if stepper.done:
                    break
                if spans:  # the rows left may report sooner
                    steps = min(steps, stepper.steps_to_next_report())
            cache = self._cache_of(stepper)
            if spans:
                reports = stepper.step_span(lambda span, c=cache: engine.denoise_span(span, c), steps, started)
            else:
                reports = [stepper.step(lambda x, tau, c=cache: engine.denoise_step(x, tau, c), started)]
            for report in reports:
                for final in report.finals:
                    yield final.row, self._piece(final)
                for done in report.done:
                    yield done.row, self._result(done)

    def _cache_of(self, stepper: BatchStepper) -> PrefixCache:
        """The PrefixCache rows of x's rows (selected again only when they changed, with the stepper's index)."""
        assert self._cache is not None and self._selected is not None
        index = stepper.x_index
        if index is not self._selected_for:
            assert index is not None  # x lost rows
            self._selected = self._cache.select(index.to(self._cache.keys.device))
            self._selected_for = index
        return self._selected

    def _piece(self, final: RowFinal) -> ChunkPiece:
        j, start = final.row, time.perf_counter()
        actions = self.processor.postprocess(final.actions[None], self.rows[j].state[None])[0].astype(np.float32)
        self.chunks[j][final.start : final.stop] = actions
        now = time.perf_counter()
        self.post_s[j] += now - start
        if self.first_s[j] is None:
            self.first_s[j] = now - self.t0
        return ChunkPiece(final.start, actions, final.step)

    def _result(self, done: RowDone) -> ChunkResult:
        j, run = done.row, done.result
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


def _batch_inputs(parts: list[Pi05Inputs], pad: int) -> Pi05Inputs:
    """The rows' model inputs as one batch, with `pad` copies of the last row (a static batch's pad rows); one row
    without padding as it is."""
    if len(parts) == 1 and not pad:
        return parts[0]
    rows = parts + parts[-1:] * pad
    return Pi05Inputs(**{f.name: torch.cat([getattr(row, f.name) for row in rows]) for f in fields(Pi05Inputs)})
