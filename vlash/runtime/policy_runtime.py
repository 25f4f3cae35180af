"""One request -> a stream of final actions: preprocess, engine prefill, flow sampling, postprocess.

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

Horizon-aware early stop: a horizon-aware request that carries `execution_horizon` s stops sampling once indices
[0, len(prefix) + s) are final (the robot runs no more of this chunk before the next one takes over), which frees
the engine sooner; its result then has fewer than H final rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from robot_io.protocol import Infer
from vlash.engines.base import Engine
from vlash.errors import ShapeError
from vlash.generator_run import GeneratorRun
from vlash.policies.pi05.processor import Observation
from vlash.policies.policy_dir import LoadedPolicy
from vlash.sampling import FlowSampler, GuidanceConfig, SamplerConfig, Schedule


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
    timing_ms: dict[str, float]  # preprocess_ms, prefill_ms, postprocess_ms, first_action_ms, total_ms
    step_ms: list[float] = field(default_factory=list)  # per denoise step (device-synchronized)


class ChunkStream(GeneratorRun[ChunkPiece, ChunkResult]):
    """An in-progress request: iterate for `ChunkPiece`s, then read `result`."""


# Called before prefill ("prefill") and before every denoise step ("step"): the server's hook for
# cancelling a superseded request and for emulating a slower device. It may raise to abort the request.
StageHook = Callable[[str], None]


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

    def run(self, request: ChunkRequest, hook: StageHook | None = None) -> ChunkResult:
        """The whole chunk (see `stream`)."""
        return self.stream(request, hook).drain()

    def stream(self, request: ChunkRequest, hook: StageHook | None = None) -> ChunkStream:
        """A lazy stream of the request's final actions; nothing runs before the first `next`."""
        return ChunkStream(self._steps(request, hook or _no_hook))

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

    def _steps(self, request: ChunkRequest, hook: StageHook) -> Generator[ChunkPiece, None, ChunkResult]:
        sync, clock = self.engine.synchronize, time.perf_counter
        t0 = clock()
        state = np.asarray(request.planning_state, np.float32)
        seed = int(self._seeds.integers(2**31)) if request.seed is None else request.seed
        sampler, kwargs = self._sampler(request)
        obs = Observation(images=request.images, state=state, prompt=request.prompt)
        inputs = self.processor.preprocess([obs], device=self.engine.device)
        noise = self._noise(seed)
        sync()
        t1 = clock()
        hook("prefill")
        cache = self.engine.prefill(inputs)
        sync()
        t2 = clock()

        def velocity(x: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
            hook("step")
            return self.engine.denoise_step(x, tau, cache)

        run = sampler.start(velocity, noise, synchronize=sync, **kwargs)
        chunk = np.full((self.horizon, self.action_dims), np.nan, np.float32)  # rows never sampled stay NaN
        prefix_len = 0 if request.prefix is None else len(request.prefix)
        chunk[:prefix_len] = request.prefix if prefix_len else chunk[:0]
        post_s, first_s = 0.0, None
        for final in run:
            tp = clock()
            actions = self.processor.postprocess(final.actions, state[None])[0].astype(np.float32)
            chunk[final.start : final.stop] = actions
            post_s += clock() - tp
            first_s = first_s if first_s is not None else clock() - t0
            yield ChunkPiece(final.start, actions, final.step)
        result = run.result
        timing = {
            "preprocess_ms": (t1 - t0) * 1e3,
            "prefill_ms": (t2 - t1) * 1e3,
            "postprocess_ms": post_s * 1e3,
            "first_action_ms": (first_s or 0.0) * 1e3,
            "total_ms": (clock() - t0) * 1e3,
        }
        step_ms = [s * 1e3 for s in result.step_times_s]
        final_at = result.final_at_step.cpu().numpy()
        return ChunkResult(chunk, final_at, result.steps_run, result.num_final, seed, timing, step_ms)


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
