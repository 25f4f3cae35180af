"""ChunkExecutor: the hand-over logic every execution mode shares (on a robot, and in `vlash eval` in simulated time).

Per control tick k (`tick(k, observation)`): (1) replies that arrived are ingested (also between ticks via
`receive(until_ns)`, which gives accurate arrival times); (2) a pending chunk whose switch step has come and
whose needed actions are final takes over; (3) a request is launched if the mode says so, built from the
observation of step k; (4) the running chunk's action for k is returned, or None (hold: waiting for the first
or a sync chunk, or a missed deadline when the running chunk has no valid action). The delay d is estimated
online (DelayEstimator); the modes differ only in the strategy hooks (`_due`, `_plan`, `_usable`, `_blend`, ...: see
strategies.py), and no mode writes the base's state.
Never raises in the loop on server trouble: errors, drops, timeouts and stale replies are counted (`counts`).

Two chunks at most are held, each a ChunkRecord (chunk.py): `pending` (requested, not running yet) and `current`
(running). Replies fill the pending chunk, and the current one while it still streams (it took over on partial
actions); the final message completes a chunk and gives its latency to the delay estimate. Errors close the
pending chunk (DROPPED: superseded by a newer request, counted apart), or cut the current one's stream (it keeps
what arrived; missing indices starve); a failing link closes both and backs off; a request without its reply
after request_timeout_s is abandoned (and re-sent by the tick).

The link counts as lost after link_timeout_s without any message while a reply is owed; then `on_link_loss`
decides whether the running chunk runs out or the robot holds at once (link.py).

Records: `records` keeps the most recent config.record_window chunk records; `on_record(record)` is called
once per record when it is final (it will not change again: superseded, failed, replaced, reset, or at
`finish()`), so a caller can stream every record without keeping them all.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from robot_io.control.clock import Clock, MonotonicClock
from robot_io.executors.chunk import ChunkRecord
from robot_io.executors.config import ExecutorConfig
from robot_io.executors.delay import DelayEstimator
from robot_io.executors.images import match_cameras
from robot_io.executors.link import LinkWatch, PolicyLink, after_loss, time_of_day
from robot_io.executors.state import Counts, Plan
from robot_io.protocol import Actions, Error, ErrorCode, Infer, Limits, Metadata
from robot_io.protocol.errors import RobotIOError, ShapeError

log = logging.getLogger(__name__)
POLL_MARGIN_NS = 1_000_000  # ZeroMQ polls in whole milliseconds: stop waiting this early so ticks start on time


class ChunkExecutor:
    """Base of the strategies: scheduling, replies, switching and bookkeeping shared by every mode."""

    mode = ""

    def __init__(self, client: PolicyLink, config: ExecutorConfig, period_s: float, clock: Clock | None = None):
        if config.mode != self.mode:
            raise ValueError(f"{type(self).__name__} runs mode {self.mode!r}, config says {config.mode!r}")
        self.client, self.config, self.period_s = client, config, float(period_s)
        self.clock = clock or MonotonicClock()
        self.delay = DelayEstimator(
            period_s, config.initial_delay, config.delay_window, config.delay_percentile, config.adapt_delay
        )
        self.metadata: Metadata | None = None
        self.records: deque[ChunkRecord] = deque(maxlen=config.record_window)  # the most recent (module doc)
        self.on_record: Callable[[ChunkRecord], None] | None = None  # each record once, when final (module doc)
        self.last_latency_ms: float | None = None  # the latest final reply's latency (live status)
        self.link = LinkWatch(config.link_timeout_s)
        self.counts = Counts()
        self.pending: ChunkRecord | None = None  # requested, not running yet
        self.current: ChunkRecord | None = None  # running
        self._last_command: np.ndarray | None = None  # the last action returned by tick (state_source "commanded")
        self._next_id = 1
        self._retry_ns = -(2**62)  # no request before this clock time (back-off after errors)
        self.waiting = True  # the last tick returned None by design (first chunk, sync; link healthy)
        self._warned: set[str] = set()
        self._max_side = getattr(client, "limits", Limits()).max_image_side  # larger camera frames are downscaled
        # robot wiring, set by the runner at setup: policy camera -> robot camera (None: identical names), and the
        # state entries the action's joints occupy (None: the state is the action's joints, in order)
        self.camera_map: dict[str, str | None] | None = None
        self.state_index: np.ndarray | None = None

    @property
    def running_mode(self) -> str:
        """The mode the running chunk was planned in ("sync" for a first request of an async mode), "" if none runs."""
        return "" if self.current is None else self.current.mode

    @property
    def streaming(self) -> ChunkRecord | None:
        """The running chunk while replies are still owed for it (it took over on streamed actions)."""
        cur = self.current
        return cur if cur is not None and not cur.complete and cur.stream_cut is None else None

    # ------------------------------------------------------------------ setup
    def start(self, metadata: Metadata | None = None) -> Metadata:
        """Handshake (unless `metadata` is given) and check the chunk length against s, d and q."""
        self.metadata = metadata if metadata is not None else self.client.connect()
        self.config.check_chunk_length(self.metadata.chunk_length)
        return self.metadata

    def reset(self) -> None:
        """Forget chunks in flight and in execution (a new episode); the next request is a first request."""
        self._drop_all("reset", "done")
        self._last_command = None

    def finish(self) -> None:
        """The run is over: hand the records still open (pending, running) to on_record as they stand."""
        for record in (self.pending, self.current):
            if record is not None:
                self._retire(record)
        self.pending = self.current = None

    def _drop_all(self, why: str, running_status: str) -> None:
        self._close_open(why)  # their remaining replies will arrive as stale
        if self.current is not None:
            self.current.status = running_status
            self._retire(self.current)
        self.current = None

    def _retire(self, record: ChunkRecord) -> None:
        if self.on_record is not None:
            self.on_record(record)

    def delay_steps(self) -> int:
        """The current online estimate of d (control steps)."""
        return self.delay.steps(self.config.max_delay(self._meta().chunk_length))

    # ------------------------------------------------------------------ the tick
    def tick(self, step: int, observation: dict | None, now_ns: int | None = None) -> np.ndarray | None:
        """The action to command at control step `step` (float32 [J]), or None when none is valid.
        `observation` None (the robot could not deliver one): nothing is requested this tick."""
        now = self.clock.now_ns() if now_ns is None else now_ns
        self._drain()
        self._expire(now)
        was_lost = self.link.lost
        if self.link.update(now):
            self._link_lost(now, step)
        elif was_lost and not self.link.lost:
            log.warning("policy link restored at %s after %.1f s without a reply", time_of_day(), self.link.outage_s)
        if self.link.lost:
            self.counts = self.counts.plus(link_lost_steps=1)
        self._activate(step)
        if self.pending is None and observation is not None and now >= self._retry_ns and self._due(step):
            self._launch(step, observation, now)
            if self.pending is not None:  # a reply that is already there (a zero-delay simulated link) runs now
                self._drain()
                self._activate(step)
        return self._command(step)

    def receive(self, until_ns: int) -> None:
        """Ingest replies until `until_ns` (clock time): call between ticks so arrival times are accurate."""
        while (remaining := until_ns - self.clock.now_ns() - POLL_MARGIN_NS) > 0:
            message = self._poll(remaining / 1e9)
            if message is None:
                return
            self._handle(message, self.clock.now_ns())

    # ------------------------------------------------------------------ strategy hooks
    def _due(self, step: int) -> bool:
        """Whether a request should be launched at `step` (no request is pending)."""
        cur = self.current
        if cur is None:
            return True
        return step >= cur.switch_step + self.config.execution_horizon - self.delay_steps()

    def _rows_to_run(self, d: int) -> int:
        """Control steps of the new chunk the robot runs after its prefix (sent as execution_horizon * q)."""
        return self.config.execution_horizon

    def _plan(self, step: int, state: np.ndarray, d: int) -> Plan | None:
        """The request and its switch; None to retry next tick (needed actions not final yet)."""
        raise NotImplementedError

    def _usable(self, chunk: ChunkRecord, index: int) -> bool:
        """Whether a chunk that has not run yet may take over running `index` now (default: the whole chunk arrived)."""
        return chunk.complete

    def _measures_ready(self) -> bool:
        """True: the delay estimate uses time-to-first-needed-action (faster), else the full latency."""
        return False

    def _blend(self, step: int, action: np.ndarray) -> np.ndarray:
        """The command at `step`, given the running chunk's own `action` for it (default: that action)."""
        return action

    def _first_plan(self, step: int) -> Plan:
        """A request with nothing to overlap with: wait for it, run it from index 0 on arrival (sync semantics)."""
        return Plan("sync", switch_step=step, first_index=0, align=False)

    # ------------------------------------------------------------------ requests and the switch
    def _meta(self) -> Metadata:
        if self.metadata is None:
            raise RuntimeError("ChunkExecutor.start() must be called before tick()")
        return self.metadata

    def _launch(self, step: int, observation: dict, now: int) -> None:
        meta, config, q = self._meta(), self.config, self.config.action_stride
        state = self._sent_state(np.asarray(observation["state"], np.float32))
        d = self.delay_steps()
        plan = self._first_plan(step) if self.current is None else self._plan(step, state, d)
        if plan is None:
            self.counts = self.counts.plus(deferred=1)
            return
        request_id, self._next_id = self._next_id, self._next_id + 1
        images = match_cameras(observation.get("images", {}), meta.cameras, self.camera_map, self._max_side)
        infer = Infer(request_id=request_id, step_index=step,
                      capture_time_ns=int(observation.get("capture_time_ns", time.time_ns())),
                      prompt=config.prompt or str(observation.get("prompt", "")), images=images, state=state,
                      future_state=plan.future_state, prefix=plan.prefix, delay_steps=plan.delay_steps,
                      schedule=plan.schedule, guidance=plan.guidance, execution_horizon=self._rows_to_run(d) * q,
                      seed=None if config.seed is None else config.seed + request_id)  # fmt: skip
        h, j = meta.chunk_length, meta.action_dim
        scale = {"absolute": None, "delta": 1.0, "velocity": self.period_s}[config.action_kind]  # one index's move
        chunk = ChunkRecord(request_id, plan.mode, step, plan.delay, plan.switch_step, plan.first_index,
                            prefix_len=0 if plan.prefix is None else len(plan.prefix),
                            actions=np.zeros((h, j), np.float32), final=np.zeros(h, bool), align=plan.align,
                            stride=q, increment_scale=scale, request_ns=now)  # fmt: skip
        self.records.append(chunk)
        self.counts = self.counts.plus(requests=1)
        self.link.requested(now)
        try:
            self.client.submit(infer)
        except RobotIOError as exc:  # refused before sending, or the link is down
            chunk.status = "error"
            self._retire(chunk)
            self._link_failed(exc)
            return
        self.pending = chunk

    def _sent_state(self, observed: np.ndarray) -> np.ndarray:
        """The state a request carries: observed, or with state_source "commanded" the last command (absolute actions)
        in the action's entries."""
        last = self._last_command
        if self.config.state_source != "commanded" or last is None:
            return observed
        state = observed.copy()
        state[slice(None) if self.state_index is None else self.state_index] = last
        return state

    def _activate(self, step: int) -> None:
        chunk = self.pending
        if chunk is None or step < chunk.planned_switch_step:
            return
        index = chunk.takeover_index(step)
        if index >= chunk.length:  # past its last row: it never can run
            self.counts = self.counts.plus(too_late=1)
            self._close(chunk, "too_late")
            return
        if not self._usable(chunk, index):
            return
        if self.current is not None:
            if self.streaming is not None:  # replaced while still streaming: its remaining replies will be stale
                self._close(self.current, "replaced")
            self.current.status = "done"
            self._retire(self.current)
        chunk.switch_step, chunk.switch_index, chunk.status = step, index, "running"
        self.current, self.pending = chunk, None
        self.counts = self.counts.plus(chunks=1)

    def _command(self, step: int) -> np.ndarray | None:
        cur = self.current
        idle = cur is None or (self.config.mode == "sync" and step >= cur.switch_step + self.config.execution_horizon)
        self.waiting = idle and not self.link.lost  # waiting on a lost link is not by design
        if idle:
            if self.waiting:
                self.counts = self.counts.plus(waiting_steps=1)
            return None
        action = cur.command(step)
        if action is None:
            self.counts = self.counts.plus(missed_deadlines=1)
            return None
        self._last_command = action = self._blend(step, action)
        return action

    # ------------------------------------------------------------------ replies, errors and the link
    def _drain(self) -> None:
        for _ in range(1000):  # bounded: a flood of messages cannot stall the tick forever
            message = self._poll(0.0)
            if message is None:
                return
            self._handle(message, self.clock.now_ns())

    def _poll(self, timeout_s: float) -> Actions | Error | None:
        try:
            return self.client.poll(timeout_s)
        except RobotIOError as exc:  # the link gave up (timeout, reset): requests in flight are lost
            self._link_failed(exc)
            return None

    def _handle(self, message: Actions | Error | object, arrival_ns: int) -> None:
        self._ingest(message, arrival_ns)
        still_owed = (self.pending is not None and not self.pending.complete) or self.streaming is not None
        self.link.heard(arrival_ns, still_owed)

    def _ingest(self, message: Actions | Error | object, arrival_ns: int) -> None:
        open_chunks = {c.chunk_id: c for c in (self.pending, self.streaming) if c is not None}
        if isinstance(message, Error):
            self._on_error(message, open_chunks)
            return
        if not isinstance(message, Actions) or message.request_id not in open_chunks:
            self.counts = self.counts.plus(stale_replies=1)
            return
        chunk = open_chunks[message.request_id]
        try:
            age_ms = chunk.fill(message, arrival_ns, self.period_s)
        except ShapeError as exc:
            self._warn_once("shape", f"reply {message.request_id}: {exc}; request abandoned")
            self._close(chunk, "error")
            self.counts = self.counts.plus(errors=1)
            return
        if chunk.ready_ms is None and self._usable(chunk, chunk.planned_index):  # its first needed action is final
            chunk.ready_ms = age_ms
            if self._measures_ready():
                self.delay.add(age_ms / 1e3)
        if message.final:
            self.last_latency_ms = age_ms
            if not self._measures_ready():
                self.delay.add(age_ms / 1e3)

    def _on_error(self, error: Error, open_chunks: dict[int, ChunkRecord]) -> None:
        chunk = open_chunks.get(error.request_id) if error.request_id is not None else self.pending
        if chunk is None:
            self.counts = self.counts.plus(stale_replies=1)
            return
        dropped = error.code == ErrorCode.DROPPED
        self.counts = self.counts.plus(dropped=1) if dropped else self.counts.plus(errors=1)
        self._warn_once(f"error:{error.code}", f"request {chunk.chunk_id}: server error {error.code}: {error.message}")
        self._close(chunk, "dropped" if dropped else "error")
        if not dropped:  # a failing server: do not ask again at the control rate
            self._back_off()

    def _close_open(self, status: str) -> None:
        for chunk in (self.pending, self.streaming):
            if chunk is not None:
                self._close(chunk, status)

    def _close(self, chunk: ChunkRecord, status: str) -> None:
        """No more replies for `chunk`: the pending one is final; the running one keeps what arrived."""
        if chunk is self.pending:
            self.pending = None
            chunk.status = status
            self._retire(chunk)
        elif chunk is self.current:
            chunk.stream_cut = status

    def _expire(self, now: int) -> None:
        timeout_s = self.config.request_timeout_s
        for chunk in (self.pending, self.streaming):
            if chunk is not None and now - chunk.request_ns > timeout_s * 1e9:
                if chunk is self.pending:  # a running chunk's stream is only cut
                    self.counts = self.counts.plus(timeouts=1)
                    self._warn_once("timeout", f"request {chunk.chunk_id}: no reply in {timeout_s} s")
                self._close(chunk, "timeout")

    def _link_failed(self, exc: Exception) -> None:
        self.counts = self.counts.plus(link_errors=1)
        self._warn_once("link", f"policy link failed: {exc}")
        self._close_open("error")
        self._back_off()

    def _back_off(self) -> None:
        self._retry_ns = self.clock.now_ns() + round(self.config.retry_after_s * 1e9)

    def _link_lost(self, now: int, step: int) -> None:
        """Every loss is logged with the time of day and what the robot does now, under the policy in force."""
        policy, cur = self.config.on_link_loss, self.current
        ticks = 0 if cur is None else -(-(cur.length - cur.index_at(step)) // cur.stride)  # its indices left
        log.warning("policy link lost at %s (no reply for %.1f s); on-link-loss %s: %s", time_of_day(),
                    self.link.silent_s(now), policy, after_loss(policy, ticks))  # fmt: skip
        if policy == "hold":  # what was planned from the running chunk is void too: start afresh when replies return
            self._drop_all("link_lost", "link_lost")

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)
        else:
            log.debug("%s", message)
