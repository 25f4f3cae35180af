"""Requests -> their rows' events: preprocess, engine prefill, the denoise loop, postprocess.

Shared by the policy server, the fleet and the evaluation harness (`vlash.eval.policies.LearnedPolicy`), so all turn a
request into a chunk the same way. Actions cross this boundary in absolute robot units; a committed prefix comes
back bit-exactly; a policy that predicts relative actions is converted with the planning state (the future state when
the request carries one).

Usage:
    runtime = PolicyRuntime(policy, create_engine("torch", model=policy.model))
    for event in runtime.stream([admit(infer, metadata, limits)]):   # or make_infer({"base_0_rgb": img}, q, "pick")
        if not event.done:    # actions [start, start + n) of request event.row are final (a RowEvent)
            send(event.start, event.actions)
        else:                 # its outcome: a ChunkResult (rows [0, final_rows) final, timing), or an exception
            finish(event.result)
    result = runtime.run(request)   # one request's ChunkResult

A request is the wire's `Infer` (robot units throughout): cameras it leaves out are masked; `future_state` (VLASH),
when given, is the state the chunk is planned from; `prefix` [d, J] holds the committed actions of chunk indices
[0, d) (an empty one is no prefix); `delay_steps` is d of guided RTC without a prefix; `schedule` None is the
runtime's default; `guidance` [n, J] is the previous chunk's leftover at indices [0, n) (guided RTC); `seed` None
draws a fresh one. `execution_horizon` s counts chunk indices the robot runs after the prefix before the next chunk
takes over: with guided RTC, indices >= min(H - s, n) are unguided and the delay is cut to that end (None: H - n;
as LeRobot's RTC); with the horizon-aware schedule sampling stops once indices [0, len(prefix) + s) are final (None:
the whole chunk); the constant schedule without guidance ignores it.

Several requests run as one batched prefill and one denoise loop (each keeps its own prompt, images, prefix,
schedule, guidance, early stop and seed, and gets the chunk it would get alone, to fp32 rounding); one request is a
batch of one (vlash.runtime.batch).

Horizon-aware early stop: a horizon-aware request that carries `execution_horizon` s stops sampling once indices
[0, len(prefix) + s) are final (the robot runs no more of this chunk before the next one takes over), which frees
the engine sooner; its result then has fewer than H final rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence

import numpy as np
import torch

from robot_io.protocol import Infer
from vlash.engines.base import Engine
from vlash.errors import ShapeError
from vlash.policies.formats.base import LoadedPolicy
from vlash.policies.processing.processor import Observation
from vlash.runtime.batch import PreparedRow, run_rows
from vlash.runtime.request import Cancelled, ChunkResult, RowEvent, make_infer, planning_state, rows_needed
from vlash.sampling import FlowSampler, GuidanceConfig, SamplerConfig, Schedule
from vlash.sampling.batch import Pace, never
from vlash.sampling.guidance_weight_bounds import DEFAULT_GUIDANCE_WEIGHT

__all__ = ["Cancelled", "ChunkResult", "PolicyRuntime", "RowEvent", "make_infer", "rows_needed"]


class PolicyRuntime:
    """A loaded policy + an engine: turns requests (`Infer`) into streams of final actions."""

    def __init__(
        self,
        policy: LoadedPolicy,
        engine: Engine,
        num_steps: int | None = None,
        schedule: str = "constant",
        guidance_weight: float = DEFAULT_GUIDANCE_WEIGHT,
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

    def stream(
        self, requests: Sequence[Infer], cancelled: Callable[[int], bool] = never, pace: Pace | None = None
    ) -> Generator[RowEvent[np.ndarray, ChunkResult], None, None]:
        """The requests as one batched prefill and denoise loop: each row's final actions as they come, then its
        done event as soon as the row is over (the others may still run). All rows run the runtime's num_steps.

        cancelled(i) is read before the prefill and before every denoise step: once it says True, request i leaves
        the batch and its done event carries Cancelled. A request that fails validation or preprocessing (ValueError,
        ShapeError) gets that exception as its outcome and never enters the batch; any other exception (an engine
        failure) ends the stream. pace(steps): called before the prefill (0) and before each pass of denoise steps
        (emulated device time). ValueError here when there are more requests than `max_batch`."""
        if self.max_batch is not None and len(requests) > self.max_batch:
            raise ValueError(f"{len(requests)} requests in one batch, the engine takes at most {self.max_batch}")
        t0 = time.perf_counter()
        rows: list[PreparedRow | Exception] = []
        for request in requests:
            try:
                rows.append(self._prepare(request))
            except ValueError as exc:  # ShapeError included: this request's outcome, the others go on
                rows.append(exc)
        yield from run_rows(self.engine, self.processor, rows, t0, cancelled, pace)

    def run_batch(self, requests: Sequence[Infer]) -> list[ChunkResult | Exception]:
        """Every request's outcome, in order (see `stream`)."""
        outcomes: list[ChunkResult | Exception | None] = [None] * len(requests)
        for event in self.stream(requests):
            if event.done:
                outcomes[event.row] = event.result
        return outcomes  # type: ignore[return-value]

    def run(self, request: Infer) -> ChunkResult:
        """One request's chunk; its exception (an invalid request) is raised."""
        (outcome,) = self.run_batch([request])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _prepare(self, request: Infer) -> PreparedRow:
        """Validate one request into its plan and model inputs (ValueError naming what does not fit), timed."""
        start = time.perf_counter()
        state = np.asarray(planning_state(request), np.float32)
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

    def rows_needed(self, request: Infer) -> int:
        """How many leading rows of the chunk `request` asks for (see `rows_needed`)."""
        prefix_len = 0 if request.prefix is None else len(request.prefix)
        return rows_needed(request.schedule or self.schedule, prefix_len, request.execution_horizon, self.horizon)

    def _sampler(self, request: Infer) -> tuple[FlowSampler, dict]:
        state, prefix = planning_state(request), request.prefix
        kwargs: dict = {}
        if prefix is not None and len(prefix):
            kwargs["prefix"] = self._model_actions(prefix, state)
        guidance = None
        if request.guidance is not None:
            n = len(request.guidance)
            if n > self.horizon:
                raise ShapeError(f"guidance has {n} actions, more than the chunk length {self.horizon}")
            s = request.execution_horizon if request.execution_horizon is not None else max(1, self.horizon - n)
            prefix_len = len(prefix) if "prefix" in kwargs else 0
            # rows past the leftover have nothing to follow: the guided rows end with it, and the fully weighted
            # ones (the delay) end no later (LeRobot's RTCProcessor cuts both the same way)
            s = min(max(s, self.horizon - n), self.horizon - prefix_len)
            guidance = GuidanceConfig(execution_horizon=s, max_weight=self.guidance_weight)
            kwargs["guidance_target"] = self._model_actions(request.guidance, state, self.horizon)
            if "prefix" not in kwargs:
                kwargs["guidance_delay"] = min(request.delay_steps, self.horizon - s)
        schedule = request.schedule or self.schedule
        needed = self.rows_needed(request)
        stop = needed if needed < self.horizon else None
        config = SamplerConfig(num_steps=self.num_steps, schedule=schedule, early_stop_final=stop, guidance=guidance)
        return FlowSampler(config), kwargs

    def _noise(self, seed: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        noise = torch.randn(1, self.horizon, self.config.action_dim, generator=gen)
        return noise.to(self.engine.device)
