"""ChunkRecord: one chunk on the robot side, from its request to its last tick (the one carrier the executor keeps).

A request makes a record that holds the chunk's buffer, which replies fill index by index (`fill`). When its
switch step comes and the index it needs is final, the chunk takes over (`switch_step`, `switch_index`): robot
step `switch_step` runs index `switch_index`, then `stride` (q) indices per step, and `command` gives each step's
action (the buffer goes on filling while the chunk runs, when it took over on streamed actions). What happened
to it (latency, status, why its stream was cut) is written into the same record; `trace_row` is what a trace keeps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from robot_io.protocol import Actions
from robot_io.protocol.errors import ShapeError

NOT_TRACED = {"trace": False}  # field metadata: the chunk itself, not part of a trace row


@dataclass(eq=False)
class ChunkRecord:
    """What happened to one request (times from the request's control tick), and the chunk it returned.

    `final[i]` says whether index i has arrived. Once the final message came, `rows` says how many leading rows the
    chunk has: H, or fewer when the server stopped sampling early (horizon-aware requests). An index past the end or
    not final has no action (None): the caller holds (the last row for absolute targets, zero for relative actions)
    and counts a missed deadline.
    """

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
    # the chunk: [H, J] float32 absolute targets, per-index increments or rates per second; [H] bool arrived
    actions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32), repr=False, metadata=NOT_TRACED)
    final: np.ndarray = field(default_factory=lambda: np.zeros(0, bool), repr=False, metadata=NOT_TRACED)
    rows: int | None = field(default=None, metadata=NOT_TRACED)  # leading rows, once the final message arrived
    # a late switch runs the index aligned with time (async); False: the planned index on arrival (sync)
    align: bool = field(default=True, metadata=NOT_TRACED)
    stride: int = field(default=1, metadata=NOT_TRACED)  # q: chunk indices per control step
    # None: absolute targets. Else relative actions (a step commands the sum of its q indices, ExecutorConfig
    # "delta" or "velocity"), and one index advances the state by `increment_scale` * action (1 for increments,
    # the control period for velocities)
    increment_scale: float | None = field(default=None, metadata=NOT_TRACED)
    request_ns: int = field(default=0, metadata=NOT_TRACED)  # clock time of the request's control tick

    def trace_row(self) -> dict[str, Any]:
        """The record as a trace keeps it (`vlash run --trace`, recordings): every field but the chunk itself."""
        return {name: dict(self.timing_ms) if name == "timing_ms" else getattr(self, name) for name in TRACE_FIELDS}

    @property
    def complete(self) -> bool:
        """The final message arrived."""
        return self.rows is not None

    @property
    def relative(self) -> bool:
        return self.increment_scale is not None

    @property
    def length(self) -> int:
        """Rows the chunk has or will have: H while streaming, `rows` once complete."""
        return len(self.actions) if self.rows is None else self.rows

    def fill(self, message: Actions, arrival_ns: int, period_s: float) -> float:
        """Copy a reply's actions in; a final message completes the chunk and sets its latency, reply step and the
        server's timing. Returns the reply's age in ms; ShapeError (nothing copied) when the actions do not fit."""
        actions = np.asarray(message.actions, np.float32)
        (h, j), start = self.actions.shape, message.start
        if actions.ndim != 2 or actions.shape[1] != j or not 0 <= start <= start + len(actions) <= h:
            raise ShapeError(f"actions {actions.shape} at {start} do not fit the chunk [{h}, {j}]")
        self.actions[start : start + len(actions)] = actions
        self.final[start : start + len(actions)] = True
        age_ms = (arrival_ns - self.request_ns) / 1e6
        if message.final:
            self.rows = start + len(actions)  # a final message carries rows [0, m)
            self.latency_ms = age_ms
            self.reply_step = self.request_step + math.ceil(age_ms / 1e3 / period_s - 1e-9)
            self.timing_ms = dict(message.timing_ms)
            self.server_ms = message.timing_ms.get("total_ms")
        return age_ms

    def takeover_index(self, step: int) -> int:
        """The index a chunk that has not run yet would run if it took over at `step`."""
        late = (step - self.planned_switch_step) * self.stride if self.align else 0
        return self.planned_index + late

    def index_at(self, step: int) -> int:
        """The index a running chunk runs at `step`."""
        return self.switch_index + (step - self.switch_step) * self.stride

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


TRACE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ChunkRecord) if f.metadata.get("trace", True))
