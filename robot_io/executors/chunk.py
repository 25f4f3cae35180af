"""Chunks in flight and in execution: RunningChunk, PendingRequest, ChunkRecord."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RunningChunk:
    """A chunk being executed: robot step `start_step` runs index `first_index`, then `stride` (q) indices per step.

    `final[i]` says whether index i has arrived (a streamed chunk fills in while it runs). Once its final message
    came, `rows` says how many leading rows the chunk has: H, or fewer when the server stopped sampling early
    (horizon-aware requests). An index past the end or not final has no action (None): the caller holds (the last
    row for absolute targets, zero for relative actions) and counts a missed deadline.
    """

    actions: np.ndarray  # [H, J] float32: absolute targets, per-index increments, or rates per second
    final: np.ndarray  # [H] bool
    start_step: int
    first_index: int
    stride: int
    chunk_id: int  # the request id it came from
    # None: absolute targets. Else relative actions (a step commands the sum of its q indices, ExecutorConfig
    # "delta" or "velocity"), and one index advances the state by `increment_scale` * action (1 for increments,
    # the control period for velocities)
    increment_scale: float | None = None
    rows: int | None = None  # leading rows the chunk has, once its final message arrived (None: still streaming)

    @property
    def relative(self) -> bool:
        return self.increment_scale is not None

    @property
    def length(self) -> int:
        """Rows the chunk has or will have: H while streaming, `rows` once complete."""
        return len(self.actions) if self.rows is None else self.rows

    def index_at(self, step: int) -> int:
        return self.first_index + (step - self.start_step) * self.stride

    def span_ready(self, start: int, stop: int) -> bool:
        """Indices [start, stop) (clamped to the chunk) are all final."""
        stop = min(stop, self.length)
        return start < self.length and bool(self.final[start:stop].all())

    def command(self, step: int) -> np.ndarray | None:
        """What to command at `step`: actions[i] (absolute) or sum(actions[i:i+q]) (relative); None if unavailable."""
        i = self.index_at(step)
        stop = i + (self.stride if self.relative else 1)
        if i < 0 or not self.span_ready(i, stop):
            return None
        if self.relative:
            return self.actions[i:stop].sum(axis=0, dtype=np.float32)
        return self.actions[i].copy()

    def window(self, step: int, length: int) -> np.ndarray | None:
        """What indices [index_at(step), + length) will command: past the end, the hold (the last row repeated for
        absolute targets, zero for relative actions); None if not all final yet."""
        idx = np.arange(length) + self.index_at(step)
        clipped = np.minimum(idx, self.length - 1)
        if not self.final[clipped].all():
            return None
        out = self.actions[clipped].copy()
        if self.relative:
            out[idx >= self.length] = 0.0
        return out

    def future_state(self, step: int, switch_step: int, state: np.ndarray) -> np.ndarray | None:
        """The state the robot will be in at `switch_step` if this chunk keeps running from `step` (METHODS.md "vlash").

        Absolute targets: the last command before the switch, actions[index_at(switch_step - 1)] (the last action
        repeated past the end). Relative actions: state + increment_scale * the sum of every index executed in
        [step, switch_step). None when those actions have not all arrived yet.
        """
        if self.relative:
            start, stop = self.index_at(step), min(self.index_at(switch_step), self.length)
            if start >= stop:
                return np.asarray(state, np.float32).copy()
            if not self.span_ready(start, stop):
                return None
            rolled = self.increment_scale * self.actions[start:stop].sum(axis=0, dtype=np.float64)
            return (np.asarray(state, np.float64) + rolled).astype(np.float32)
        i = min(self.index_at(switch_step - 1), self.length - 1)
        return self.actions[i].copy() if self.final[i] else None


@dataclass
class ChunkRecord:
    """What happened to one request, for the summary and the plots (times from the request's control tick)."""

    chunk_id: int  # request id
    mode: str  # "sync" for the first chunk of an async mode (nothing to overlap with), else the mode
    request_step: int  # control step of the observation
    delay_steps: int  # d used to plan the switch
    planned_switch_step: int  # step at which the chunk was planned to take over
    planned_index: int  # chunk index planned for that step
    prefix_len: int = 0  # committed prefix sent (prefix, faster)
    ready_ms: float | None = None  # until the first action it needs was final (TTFA of this chunk)
    latency_ms: float | None = None  # until the final message
    reply_step: int | None = None  # first control step at or after the final message
    server_ms: float | None = None  # timing_ms["total_ms"] reported by the server
    switch_step: int | None = None  # step at which it took over (None: never ran)
    switch_index: int | None = None  # chunk index run at switch_step
    # pending, running, done, dropped, error, timeout, too_late, reset, link_lost (on_link_loss "hold" stopped it)
    status: str = "pending"
    # a chunk that took over on streamed actions and then stopped receiving before its final message: why
    # (dropped: the server cancelled it for the next request; error; timeout; reset: a new episode began;
    # replaced: the next chunk took over first; link_lost). Its missing actions starve. None otherwise
    stream_cut: str | None = None
    timing_ms: dict[str, float] = field(default_factory=dict)  # the server's breakdown


@dataclass
class PendingRequest:
    """A request on its way: the buffer its Actions fill, and how it will take over."""

    record: ChunkRecord
    request_ns: int  # clock time of the request's control tick
    actions: np.ndarray  # [H, J]
    final: np.ndarray  # [H] bool
    align: bool  # a late switch runs the index aligned with time (async); False: index 0 on arrival (sync)
    rows: int | None = None  # leading rows the final message said the chunk has (H, or fewer after an early stop)

    @property
    def complete(self) -> bool:
        """The final message arrived."""
        return self.rows is not None

    @property
    def chunk_id(self) -> int:
        return self.record.chunk_id

    def index_for(self, step: int, stride: int) -> int:
        rec = self.record
        return rec.planned_index + (step - rec.planned_switch_step) * stride if self.align else rec.planned_index
