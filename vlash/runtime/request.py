"""The runtime's request and its outcome. A request is the wire's own `Infer`, as admission passed it
(vlash.runtime.admission: checked once, where it arrived), never copied into another type; `make_infer` makes one in
process (benchmarks, tests, warm-up). A request's row yields the one event type of the sampler (`RowEvent`,
vlash.sampling.events), here in robot units, ending in its outcome: a `ChunkResult`, or the exception that took it
out. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robot_io.protocol import Infer
from vlash.sampling.events import Cancelled, RowEvent
from vlash.sampling.schedule_names import Schedule

__all__ = ["Cancelled", "ChunkResult", "Infer", "RowEvent", "make_infer", "planning_state", "rows_needed"]


def make_infer(images: dict[str, np.ndarray], state: np.ndarray, prompt: str, **fields: Any) -> Infer:
    """A request made in process, not received (request_id, step_index and capture time 0): `fields` are Infer's
    planning fields (future_state, prefix, delay_steps, schedule, guidance, execution_horizon, seed)."""
    return Infer(request_id=0, step_index=0, capture_time_ns=0, prompt=prompt, images=images, state=state, **fields)


def planning_state(request: Infer) -> np.ndarray:
    """The state a chunk is planned from: the future state (VLASH) when the request carries one, else its state."""
    return request.state if request.future_state is None else request.future_state


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
    (an early stop, see Infer.execution_horizon) and hold NaN."""

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
