"""Requests -> streams of final actions: preprocess, engine prefill, flow sampling, postprocess.

Shared by the policy server and the evaluation harness (`vlash.eval.policies.ModelPolicy`), so both turn a
request into a chunk the same way. Actions cross this boundary in absolute robot units; a committed prefix
comes back bit-exactly; a policy that predicts relative actions is converted with the planning state (the
future state when the request carries one).

Usage:
    runtime = PolicyRuntime(policy, create_engine("torch", model=policy.model))
    stream = runtime.stream(ChunkRequest(images={"base_0_rgb": img}, state=q, prompt="pick"))
    for piece in stream:      # ChunkPiece: actions [start, start + n) are final
        send(piece)
    result = stream.result    # ChunkResult: the chunk (rows [0, final_rows) final) + timing breakdown

Several requests run as one batched prefill and one batched denoise loop (`stream_batch` / `run_batch`; each keeps
its own prompt, images, prefix, schedule, guidance, early stop and seed, and gets the chunk it would get alone, to
fp32 rounding); `stream` is that path with one request (vlash.runtime.batch).

Horizon-aware early stop: a horizon-aware request that carries `execution_horizon` s stops sampling once indices
[0, len(prefix) + s) are final (the robot runs no more of this chunk before the next one takes over), which frees
the engine sooner; its result then has fewer than H final rows.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from robot_io.protocol import Infer
from vlash.engines.base import Engine
from vlash.errors import ShapeError
from vlash.generator_run import GeneratorRun
from vlash.policies.formats.base import LoadedPolicy
from vlash.policies.processing.processor import Observation
from vlash.runtime.batch import (
    BatchDone,
    BatchEvent,
    BatchPiece,
    BatchStream,
    ChunkPiece,
    ChunkResult,
    PreparedRow,
    StageHook,
    run_rows,
)
from vlash.sampling import FlowSampler, GuidanceConfig, SamplerConfig, Schedule

__all__ = [
    "BatchDone",
    "BatchEvent",
    "BatchPiece",
    "BatchStream",
    "ChunkPiece",
    "ChunkRequest",
    "ChunkResult",
    "ChunkStream",
    "PolicyRuntime",
    "StageHook",
    "rows_needed",
]


@dataclass(frozen=True)
class ChunkRequest:
    """What a chunk is planned from (robot units throughout)."""

    images: Mapping[str, np.ndarray]  # camera name -> uint8 [H, W, 3]; cameras left out are masked
    state: np.ndarray  # [D] observed joint state
    prompt: str  # task instruction
    future_state: np.ndarray | None = None  # [D] state the chunk starts from (VLASH); plans from it when given
    prefix: np.ndarray | None = None  # [d, J] committed actions of chunk indices [0, d), returned bit-exactly
    delay_steps: int = 0  # d of guided RTC without a prefix (indices frozen while the chunk is computed)
    schedule: str | None = None  # "constant" | "horizon-aware"; None: the runtime's default
    guidance: np.ndarray | None = None  # [n, J] previous chunk's leftover at indices [0, n): guided RTC
    # s in chunk indices (the robot's control steps times its quantization): the indices of this chunk the robot
    # runs after the prefix before the next chunk takes over. Guided RTC: indices >= H - s are unguided (None:
    # H - n). Horizon-aware schedule: sampling stops once indices [0, len(prefix) + s) are final, so the result
    # may have fewer than H final rows (None: the whole chunk). Ignored by the constant schedule without guidance.
    execution_horizon: int | None = None
    seed: int | None = None  # noise seed; None: a fresh random seed

    @property
    def planning_state(self) -> np.ndarray:
        return self.state if self.future_state is None else self.future_state

    @classmethod
    def from_infer(cls, infer: Infer) -> ChunkRequest:
        """The request an INFER message asks for (an empty prefix is no prefix). Shared by the server and the
        evaluation harness, so both plan a chunk from the same fields."""
        prefix = infer.prefix if infer.prefix is not None and len(infer.prefix) else None
        return cls(
            images=infer.images,
            state=infer.state,
            prompt=infer.prompt,
            future_state=infer.future_state,
            prefix=prefix,
            delay_steps=infer.delay_steps,
            schedule=infer.schedule,
            guidance=infer.guidance,
            execution_horizon=infer.execution_horizon,
            seed=infer.seed,
        )


class ChunkStream(GeneratorRun[ChunkPiece, ChunkResult]):
    """An in-progress request: iterate for `ChunkPiece`s, then read `result`."""


class PolicyRuntime:
    """A loaded policy + an engine: turns `ChunkRequest`s into streams of final actions."""

    def __init__(
        self,
        policy: LoadedPolicy,
        engine: Engine,
        num_steps: int | None = None,
        schedule: str = "constant",
        guidance_weight: float = 5.0,
    ) -> None:
        self.policy = policy
        self.processor = policy.processor
        self.engine = engine
        self.config = policy.config
        self.horizon = policy.config.action_horizon
        self.num_steps = num_steps or policy.config.num_steps
        self.schedule = Schedule(schedule).value
        self.guidance_weight = guidance_weight
        self._seeds = np.random.default_rng()

    @property
    def action_dims(self) -> int:
        """Real action dims of the robot (the model's are padded to config.action_dim)."""
        return self.processor.action_dims

    @property
    def state_dims(self) -> int:
        """State entries a request must carry."""
        dims = self.processor.prompt_encoder.state_dims
        if dims is not None:
            return dims
        feature_dim = self.processor.normalizer.feature(self.processor.state_key).dim
        return feature_dim if feature_dim is not None else self.action_dims

    @property
    def max_batch(self) -> int | None:
        """Rows one batched call may carry: None = any (torch); an engine of static batch (an onnxruntime or
        tensorrt export) -> its batch."""
        return self.engine.max_batch

    def run(self, request: ChunkRequest, hook: StageHook | None = None) -> ChunkResult:
        """The whole chunk (see `stream`)."""
        return self.stream(request, hook).drain()

    def stream(self, request: ChunkRequest, hook: StageHook | None = None) -> ChunkStream:
        """A lazy stream of the request's final actions; nothing runs before the first `next`. The batch path with
        one request: an invalid request (ValueError) or a raising `hook` raises from the stream."""
        return ChunkStream(self._single(request, hook))

    def run_batch(
        self,
        requests: Sequence[ChunkRequest],
        row_hooks: Sequence[StageHook] | None = None,
        stage_hook: StageHook | None = None,
    ) -> list[ChunkResult | Exception]:
        """Every request's outcome, in order (see `stream_batch`)."""
        return self.stream_batch(requests, row_hooks, stage_hook).drain()

    def stream_batch(
        self,
        requests: Sequence[ChunkRequest],
        row_hooks: Sequence[StageHook] | None = None,
        stage_hook: StageHook | None = None,
    ) -> BatchStream:
        """The requests as one batched prefill and denoise loop: a lazy stream of `BatchPiece`s, each row's as soon
        as they are final, and of one `BatchDone` per request as soon as it is over (finished or failed: its outcome,
        while other rows may still run); `result` holds one outcome per request, in order. All rows run the
        runtime's num_steps.

        stage_hook(stage) runs once per stage of the batch ("prefill", then "step" before each denoise step); its
        exception aborts the batch. row_hooks[i](stage) runs before each stage while request i runs; its exception
        takes the row out and becomes its outcome. A request that fails validation or preprocessing (ValueError,
        ShapeError) gets that exception as its outcome and never enters the batch; any other exception (an engine
        failure) fails the whole batch. ValueError here when there are more requests than `max_batch`, or
        row_hooks is not one per request.
        """
        if self.max_batch is not None and len(requests) > self.max_batch:
            raise ValueError(f"{len(requests)} requests in one batch, the engine takes at most {self.max_batch}")
        if row_hooks is not None and len(row_hooks) != len(requests):
            raise ValueError(f"row_hooks must have one hook per request ({len(requests)}), got {len(row_hooks)}")
        hooks = list(row_hooks) if row_hooks is not None else [_no_hook] * len(requests)
        return BatchStream(self._batch(list(requests), hooks, stage_hook or _no_hook))

    def _single(self, request: ChunkRequest, hook: StageHook | None) -> Generator[ChunkPiece, None, ChunkResult]:
        batch = self.stream_batch([request], [hook or _no_hook])
        for event in batch:
            if isinstance(event, BatchPiece):
                yield event.piece
        (outcome,) = batch.result
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _batch(
        self, requests: list[ChunkRequest], row_hooks: list[StageHook], stage_hook: StageHook
    ) -> Generator[BatchEvent, None, list[ChunkResult | Exception]]:
        t0 = time.perf_counter()
        rows: list[PreparedRow | Exception] = []
        for request in requests:
            try:
                rows.append(self._prepare(request))
            except ValueError as exc:  # ShapeError included: this request's outcome, the others go on
                rows.append(exc)
        return (yield from run_rows(self.engine, self.processor, rows, row_hooks, stage_hook, t0))

    def _prepare(self, request: ChunkRequest) -> PreparedRow:
        """Validate one request into its plan and model inputs (ValueError naming what does not fit), timed."""
        start = time.perf_counter()
        state = np.asarray(request.planning_state, np.float32)
        seed = int(self._seeds.integers(2**31)) if request.seed is None else request.seed
        sampler, kwargs = self._sampler(request)
        plan = sampler.plan(self._noise(seed), **kwargs)
        obs = Observation(images=request.images, state=state, prompt=request.prompt)
        inputs = self.processor.preprocess([obs], device=self.engine.device)
        prefix = None if request.prefix is None or not len(request.prefix) else request.prefix
        self.engine.synchronize()
        return PreparedRow(inputs, plan, state, prefix, seed, time.perf_counter() - start)

    def _model_actions(self, actions: np.ndarray, state: np.ndarray, length: int | None = None) -> torch.Tensor:
        """Robot-unit actions [n, J] -> normalized, zero-padded model actions [1, length or n, A] on the device.
        Rows past n (when `length` > n) repeat the last row."""
        actions = np.asarray(actions, np.float32)
        if actions.ndim != 2 or actions.shape[1] != self.action_dims or len(actions) == 0:
            raise ShapeError(f"actions must be [n >= 1, {self.action_dims}], got {actions.shape}")
        if length is not None and length > len(actions):
            actions = np.concatenate([actions, np.repeat(actions[-1:], length - len(actions), axis=0)])
        norm = self.processor.to_model_actions(actions, state)
        padded = np.zeros((len(actions), self.config.action_dim), np.float32)
        padded[:, : norm.shape[-1]] = norm
        return torch.from_numpy(padded)[None].to(self.engine.device)

    def rows_needed(self, request: ChunkRequest) -> int:
        """How many leading rows of the chunk `request` asks for (see `rows_needed`)."""
        prefix_len = 0 if request.prefix is None else len(request.prefix)
        return rows_needed(request.schedule or self.schedule, prefix_len, request.execution_horizon, self.horizon)

    def _sampler(self, request: ChunkRequest) -> tuple[FlowSampler, dict]:
        state, prefix = request.planning_state, request.prefix
        kwargs: dict = {}
        if prefix is not None and len(prefix):
            kwargs["prefix"] = self._model_actions(prefix, state)
        guidance = None
        if request.guidance is not None:
            n = len(request.guidance)
            if n > self.horizon:
                raise ShapeError(f"guidance has {n} actions, more than the chunk length {self.horizon}")
            s = request.execution_horizon if request.execution_horizon is not None else max(1, self.horizon - n)
            guidance = GuidanceConfig(execution_horizon=s, max_weight=self.guidance_weight)
            kwargs["guidance_target"] = self._model_actions(request.guidance, state, self.horizon)
            if "prefix" not in kwargs:
                kwargs["guidance_delay"] = request.delay_steps
        schedule = request.schedule or self.schedule
        needed = self.rows_needed(request)
        stop = needed if needed < self.horizon else None
        config = SamplerConfig(num_steps=self.num_steps, schedule=schedule, early_stop_final=stop, guidance=guidance)
        return FlowSampler(config), kwargs

    def _noise(self, seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        noise = torch.randn(1, self.horizon, self.config.action_dim, generator=gen)
        return noise.to(self.engine.device)


def rows_needed(schedule: str, prefix_len: int, execution_horizon: int | None, horizon: int) -> int:
    """Leading rows a request needs: min(H, prefix_len + s) for a horizon-aware request with an execution horizon s
    (sampling stops once they are final: the early stop), else the whole chunk H."""
    if schedule != Schedule.HORIZON_AWARE.value or execution_horizon is None:
        return horizon
    if execution_horizon < 1:
        raise ValueError(f"execution_horizon must be >= 1, got {execution_horizon}")
    return min(horizon, prefix_len + int(execution_horizon))


def _no_hook(stage: str) -> None:
    return None
