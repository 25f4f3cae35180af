"""The policy link of a simulated robot: an in-process stand-in for a policy server with scripted latency, on any
clock (`vlash eval` runs the robot's executors against it in simulated time).

    clock = SimulatedClock()
    link = SimulatedPolicyLink(expert_planner(sim_robot), sim_metadata(sim_robot), clock, latency_s=0.05)

SimulatedPolicyLink satisfies the executors' PolicyLink (connect / submit / poll): a request's chunk is computed
at submit time by `plan(infer)` and its Actions become available `latency_s` later on `clock` (simulated or
real). `stream` lists partial messages as (fraction of the latency, number of new actions final), like the
horizon-aware sampler's streaming. A planner may instead return a PlannedChunk that says itself when each
message is due and how many rows its final message carries (vlash eval's timing model does). A newer request
drops the older one (Error DROPPED), as the server does. `replying = False` makes it a dead server (requests
swallowed) until set back. numpy and robot_io only: the robot side's tests use it without the simulator.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from robot_io.control.clock import Clock
from robot_io.protocol import Actions, Error, ErrorCode, Infer, Metadata


@dataclass(frozen=True)
class PlannedChunk:
    """A planner's chunk with its own message timing, as fractions of the client's latency: partial messages
    (fraction, stop) make rows [.., stop) final; the final message at `final_fraction` carries rows [0, rows)."""

    actions: np.ndarray  # [H, J]
    pieces: tuple[tuple[float, int], ...] = ()  # (fraction of the latency, stop index), in time order
    rows: int | None = None  # rows of the final message (None: the whole chunk); fewer: sampling stopped early
    final_fraction: float = 1.0  # when the final message is due, as a fraction of the latency


Planner = Callable[[Infer], "np.ndarray | PlannedChunk"]


class SimulatedPolicyLink:
    def __init__(
        self,
        plan: Planner,
        metadata: Metadata,
        clock: Clock,
        latency_s: float | Callable[[Infer], float] = 0.05,
        stream: Sequence[tuple[float, int]] = (),
        history: int | None = None,
    ) -> None:
        self.plan, self.metadata, self.clock, self.latency_s, self.stream = plan, metadata, clock, latency_s, stream
        # every request submitted, in order; with `history`, only the most recent (long runs)
        self.requests: list[Infer] | deque[Infer] = [] if history is None else deque(maxlen=history)
        self.replying = True  # False: requests are swallowed (a dead server)
        self.connects = 0
        self._queue: list[tuple[int, int, Actions | Error]] = []  # (due_ns, seq, message)
        self._seq = 0

    def connect(self) -> Metadata:
        self.connects += 1
        return self.metadata

    def submit(self, infer: Infer) -> None:
        self.requests.append(infer)
        now = self.clock.now_ns()
        older = {m.request_id for _, _, m in self._queue if isinstance(m, Actions)}
        self._queue = [item for item in self._queue if not isinstance(item[2], Actions)]
        for rid in sorted(older):
            self._push(now, Error(ErrorCode.DROPPED, "superseded by a newer request", rid))
        if not self.replying:
            return
        planned = self.plan(infer)
        h = self.metadata.chunk_length
        c = 0 if infer.prefix is None else len(infer.prefix)
        if not isinstance(planned, PlannedChunk):
            planned = PlannedChunk(planned, tuple((fraction, c + count) for fraction, count in self.stream))
        chunk = np.asarray(planned.actions, np.float32).copy()
        if chunk.shape != (h, self.metadata.action_dim):
            raise ValueError(
                f"SimulatedPolicyLink: plan returned {chunk.shape}, expected ({h}, {self.metadata.action_dim})"
            )
        if c:
            chunk[:c] = infer.prefix  # committed actions come back bit-exact
        latency = self.latency_s(infer) if callable(self.latency_s) else self.latency_s
        rows = h if planned.rows is None else planned.rows
        done = c
        for fraction, stop in planned.pieces:
            stop = min(rows, stop)
            if stop > done:
                self._push(now + round(fraction * latency * 1e9), self._actions(infer, chunk, done, stop, False, {}))
                done = stop
        final_s = planned.final_fraction * latency
        self._push(now + round(final_s * 1e9), self._actions(infer, chunk, 0, rows, True, {"total_ms": final_s * 1e3}))

    def poll(self, timeout_s: float = 0.0) -> Actions | Error | None:
        deadline = self.clock.now_ns() + max(0, round(timeout_s * 1e9))
        if self._queue and self._queue[0][0] <= deadline:
            self.clock.sleep_until(self._queue[0][0])
            return heapq.heappop(self._queue)[2]
        self.clock.sleep_until(deadline)
        return None

    def reset(self) -> None:
        self._queue.clear()

    def close(self) -> None:
        self._queue.clear()

    def _actions(self, infer: Infer, chunk: np.ndarray, start: int, stop: int, final: bool, timing: dict) -> Actions:
        return Actions(infer.request_id, start, chunk[start:stop].copy(), final, len(chunk), infer.step_index, timing)

    def _push(self, due_ns: int, message: Actions | Error) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (due_ns, self._seq, message))
