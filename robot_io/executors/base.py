"""ChunkExecutor: the hand-over logic every execution mode shares (on a robot, and in `vlash eval` in simulated time).

Per control tick k (`tick(k, observation)`): (1) replies that arrived are ingested (also between ticks via
`receive(until_ns)`, which gives accurate arrival times); (2) a pending chunk whose switch step has come and
whose needed actions are final takes over; (3) a request is launched if the mode says so, built from the
observation of step k; (4) the running chunk's action for k is returned, or None (hold: waiting for the first
or a sync chunk, or a missed deadline when the running chunk has no valid action). The delay d is estimated
online (DelayEstimator); the modes differ only in `_due`, `_plan` and `_usable` (see strategies.py).
Never raises in the loop on server trouble: errors, drops, timeouts and stale replies are counted.

When the server dies: the client gives up on a request after its timeout (PolicyClient timeout_s, `vlash run
--timeout`), the executor after request_timeout_s, and both keep asking (non-blocking, after retry_after_s).
The link counts as lost after link_timeout_s without any message while a reply is owed (LinkWatch, link.py).
Then `on_link_loss` decides: "finish-chunk" (the default) keeps executing the running chunk until its last index
has run (up to a whole chunk, H ticks, when the server dies just after a switch) before the watchdog holds;
right for a healthy link with a slow reply. "hold" stops executing it in the tick the link counts as lost, so the
watchdog holds from then on; when replies return, a first (sync) request starts afresh. Ticks while the link is
lost are never counted as waiting by design (RunSummary.unexpected_holds counts their holds).

Records: `records` keeps the most recent config.record_window chunk records; `on_record(record)` is called
once per record when it is final (it will not change again: superseded, failed, replaced, reset, or at
`finish()`), so a caller can stream every record without keeping them all.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

import numpy as np

from robot_io.control.clock import Clock, MonotonicClock
from robot_io.executors.chunk import ChunkRecord, PendingRequest, RunningChunk
from robot_io.executors.config import ExecutorConfig
from robot_io.executors.delay import DelayEstimator
from robot_io.executors.images import match_cameras
from robot_io.executors.link import LinkWatch
from robot_io.executors.replies import ReplyHandling
from robot_io.protocol import Actions, Error, Infer, Limits, Metadata
from robot_io.protocol.errors import RobotIOError

log = logging.getLogger(__name__)
POLL_MARGIN_NS = 1_000_000  # ZeroMQ polls in whole milliseconds: stop waiting this early so ticks start on time


class PolicyLink(Protocol):
    """What an executor needs from a policy; robot_io.client.PolicyClient satisfies it (so do test fakes)."""

    def connect(self) -> Metadata: ...

    def submit(self, infer: Infer) -> None: ...

    def poll(self, timeout_s: float) -> Actions | Error | None: ...


class ChunkExecutor(ReplyHandling):
    """Base of the strategies: scheduling, ingestion, switching and bookkeeping shared by every mode."""

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
        self.current: RunningChunk | None = None
        self._last_command: np.ndarray | None = None  # the last action returned by tick (state_source "commanded")
        self.pending: PendingRequest | None = None
        self._streaming: PendingRequest | None = None  # the running chunk's request while it still streams
        self._running: ChunkRecord | None = None  # the running chunk's record
        self._next_id = 1
        self._retry_ns = -(2**62)  # no request before this clock time (back-off after errors)
        self.waiting = True  # the last tick returned None by design (first chunk, sync; link healthy)
        self._warned: set[str] = set()
        self._max_side = getattr(client, "limits", Limits()).max_image_side  # larger camera frames are downscaled
        # robot wiring, set by the runner at setup: policy camera -> robot camera (None: identical names), and the
        # state entries the action's joints occupy (None: the state is the action's joints, in order)
        self.camera_map: dict[str, str | None] | None = None
        self.state_index: np.ndarray | None = None
        self.counts = dict(requests=0, chunks=0, wait_steps=0, starved_steps=0, stale=0, errors=0, dropped=0,
                           timeouts=0, too_late=0, deferred=0, link_errors=0, link_lost_steps=0)  # fmt: skip

    @property
    def running_mode(self) -> str:
        """The mode the running chunk was planned in ("sync" for a first request of an async mode), "" if none runs."""
        return "" if self._running is None else self._running.mode

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
        for record in (None if self.pending is None else self.pending.record, self._running):
            if record is not None:
                self._retire(record)
        self.pending = self._streaming = self._running = None

    def _drop_all(self, why: str, running_status: str) -> None:
        for req in (self.pending, self._streaming):  # their remaining replies will arrive as stale
            if req is not None:
                self._close(req, why)
        if self._running is not None:
            self._running.status = running_status
            self._retire(self._running)
        self.current = self._running = None

    def _retire(self, record: ChunkRecord) -> None:
        if self.on_record is not None:
            self.on_record(record)

    @property
    def horizon(self) -> int:
        return self._meta().chunk_length

    def delay_steps(self) -> int:
        """The current online estimate of d (control steps)."""
        return self.delay.steps(self.config.max_delay(self.horizon))

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
            self._link_restored()
        self.counts["link_lost_steps"] += self.link.lost
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
        return step >= cur.start_step + self.config.execution_horizon - self._launch_delay()

    def _launch_delay(self) -> int:
        return self.delay_steps()

    def _rows_to_run(self, d: int) -> int:
        """Control steps of the new chunk the robot runs after its prefix (sent as execution_horizon * q)."""
        return self.config.execution_horizon

    def _plan(self, step: int, state: np.ndarray, d: int) -> dict | None:
        """Fields of the Infer and the switch plan; None to retry next tick (needed actions not final yet)."""
        raise NotImplementedError

    def _usable(self, req: PendingRequest, index: int) -> bool:
        """Whether the pending chunk may take over running `index` now (default: the whole chunk arrived)."""
        return req.complete

    def _first_plan(self, step: int) -> dict:
        """A request with nothing to overlap with: wait for it, run it from index 0 on arrival (sync semantics)."""
        return dict(infer={}, switch_step=step, first_index=0, align=False, delay=0, mode="sync")

    # ------------------------------------------------------------------ internals
    def _meta(self) -> Metadata:
        if self.metadata is None:
            raise RuntimeError("ChunkExecutor.start() must be called before tick()")
        return self.metadata

    def _launch(self, step: int, observation: dict, now: int) -> None:
        meta, q = self._meta(), self.config.action_stride
        state = self._sent_state(np.asarray(observation["state"], np.float32))
        d = self._launch_delay()
        plan = self._first_plan(step) if self.current is None else self._plan(step, state, d)
        if plan is None:
            self.counts["deferred"] += 1
            return
        request_id, self._next_id = self._next_id, self._next_id + 1
        fields = plan["infer"]
        infer = Infer(
            request_id=request_id,
            step_index=step,
            capture_time_ns=int(observation.get("capture_time_ns", time.time_ns())),
            prompt=self.config.prompt or str(observation.get("prompt", "")),
            images=match_cameras(observation.get("images", {}), meta.cameras, self.camera_map, self._max_side),
            state=state,
            execution_horizon=self._rows_to_run(d) * q,
            seed=None if self.config.seed is None else self.config.seed + request_id,
            **fields,
        )
        prefix = fields.get("prefix")
        record = ChunkRecord(
            chunk_id=request_id,
            mode=plan["mode"],
            request_step=step,
            delay_steps=plan["delay"],
            planned_switch_step=plan["switch_step"],
            planned_index=plan["first_index"],
            prefix_len=0 if prefix is None else len(prefix),
        )
        h, j = meta.chunk_length, meta.action_dim
        req = PendingRequest(record, now, np.zeros((h, j), np.float32), np.zeros(h, bool), plan["align"])
        self.records.append(record)
        self.counts["requests"] += 1
        self.link.requested(now)
        try:
            self.client.submit(infer)
        except RobotIOError as exc:  # refused before sending, or the link is down
            record.status = "error"
            self._retire(record)
            self._link_failed(exc)
            return
        self.pending = req

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
        req, q = self.pending, self.config.action_stride
        if req is None or step < req.record.planned_switch_step:
            return
        index = req.index_for(step, q)
        if index >= (len(req.actions) if req.rows is None else req.rows):  # past its last row: it never can run
            self.counts["too_late"] += 1
            self._close(req, "too_late")
            return
        if not self._usable(req, index):
            return
        if self._streaming is not None:  # replaced while still streaming: its remaining replies will be stale
            self._close(self._streaming, "replaced")
        if self._running is not None:
            self._running.status = "done"
            self._retire(self._running)
        rec = req.record
        rec.switch_step, rec.switch_index, rec.status = step, index, "running"
        self.current = RunningChunk(
            req.actions, req.final, step, index, q, req.chunk_id, self._increment_scale(), req.rows
        )
        self._running, self.pending = rec, None
        self._streaming = None if req.complete else req
        self.counts["chunks"] += 1

    def _increment_scale(self) -> float | None:
        """How far one index of a relative action moves the state (RunningChunk.increment_scale)."""
        return {"absolute": None, "delta": 1.0, "velocity": self.period_s}[self.config.action_kind]

    def _command(self, step: int) -> np.ndarray | None:
        cur = self.current
        idle = cur is None or (self.config.mode == "sync" and step >= cur.start_step + self.config.execution_horizon)
        self.waiting = idle and not self.link.lost  # waiting on a lost link is not by design
        if idle:
            self.counts["wait_steps"] += self.waiting
            return None
        action = cur.command(step)
        if action is None:
            self.counts["starved_steps"] += 1
        else:
            self._last_command = action
        return action

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)
        else:
            log.debug("%s", message)
