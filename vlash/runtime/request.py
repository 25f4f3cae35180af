"""The one request type of the runtime (`ChunkRequest`: what a chunk is planned from), made once from a wire INFER at
the edge of the server, and the events a request's row yields while it runs (`RowEvent`, ending in its outcome: a
`ChunkResult`, or the exception that took it out)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from robot_io.protocol import Infer
from vlash.sampling.schedule_names import Schedule


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
    # s in chunk indices (the robot's control steps times its action_stride): the indices of this chunk the robot
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
        """The request an INFER message asks for (an empty prefix is no prefix): made once, where the message
        arrives (the server, the evaluation harness's simulated link)."""
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


def rows_needed(schedule: str, prefix_len: int, execution_horizon: int | None, horizon: int) -> int:
    """Leading rows a request needs: min(H, prefix_len + s) for a horizon-aware request with an execution horizon s
    (sampling stops once they are final: the early stop), else the whole chunk H."""
    if schedule != Schedule.HORIZON_AWARE.value or execution_horizon is None:
        return horizon
    if execution_horizon < 1:
        raise ValueError(f"execution_horizon must be >= 1, got {execution_horizon}")
    return min(horizon, prefix_len + int(execution_horizon))


@dataclass(frozen=True)
class ChunkResult:
    """A finished request. Rows [0, final_rows) of `actions` are the chunk; rows past them were never sampled
    (an early stop, see ChunkRequest.execution_horizon) and hold NaN."""

    actions: np.ndarray  # fp32 [H, J] absolute robot units (prefix bit-exact); rows >= final_rows are NaN
    final_at_step: np.ndarray  # int64 [H]: step after which each index was final (-2: prefix, -1: never)
    num_steps: int  # denoise steps run (fewer than the runtime's num_steps after an early stop)
    final_rows: int  # m: leading rows that are final (prefix included), >= rows_needed(request); H without early stop
    seed: int  # the noise seed used
    # preprocess_ms (this request's own), prefill_ms (the batch's, shared by its rows), postprocess_ms,
    # first_action_ms and total_ms (from the start of the batch's preprocessing)
    timing_ms: dict[str, float]
    step_ms: list[float] = field(default_factory=list)  # per denoise step of the batch (device-synchronized)
    batch_size: int = 1  # requests that shared this one's prefill and denoise loop (1: it ran alone)


class Cancelled(Exception):
    """The outcome of a row its caller cancelled (PolicyRuntime.stream's `cancelled` said so): it left its batch."""


@dataclass(frozen=True)
class RowEvent:
    """What happened to request `row` of a batch: actions [start, start + len(actions)) became final after denoise
    step `step` (robot units); or, with `result` set, the row is over: its ChunkResult, or the exception that took it
    out (its validation, Cancelled). Each request's last event is its one `done` event."""

    row: int  # index into the requests
    start: int = 0  # first chunk index of `actions`
    actions: np.ndarray | None = None  # fp32 [n, J]; None on the done event
    step: int = -1  # 0-based denoise step after which they became final
    result: ChunkResult | Exception | None = None  # set on the done event

    @property
    def done(self) -> bool:
        return self.result is not None
