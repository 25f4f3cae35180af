"""ReplyHandling: what the executor does with the policy link's messages and failures (a part of ChunkExecutor).

Replies fill the pending request's buffer (partial Actions index by index, the final one completes it) and give
its latency to the delay estimate; errors close it (DROPPED: superseded by a newer request, counted apart);
a failing link closes every request in flight and backs off; requests without their reply after
request_timeout_s are abandoned (and re-sent by the tick). Every message also tells the LinkWatch that the
server is alive. The methods use ChunkExecutor's state (base.py): pending, _streaming, _running, counts, link.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from robot_io.executors.chunk import PendingRequest
from robot_io.executors.link import time_of_day
from robot_io.protocol import Actions, Error, ErrorCode
from robot_io.protocol.errors import RobotIOError

log = logging.getLogger(__name__)


class ReplyHandling:
    """Ingestion of replies, errors and link failures for ChunkExecutor (see the module doc)."""

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

    def _link_failed(self, exc: Exception) -> None:
        self.counts["link_errors"] += 1
        self._warn_once("link", f"policy link failed: {exc}")
        for req in (self.pending, self._streaming):
            if req is not None:
                self._close(req, "error")
        self._back_off()

    def _back_off(self) -> None:
        self._retry_ns = self.clock.now_ns() + round(self.config.retry_after_s * 1e9)

    def _link_lost(self, now: int, step: int) -> None:
        """Every loss is logged with the time of day and what the robot does now, under the policy in force."""
        policy, cur = self.config.on_link_loss, self.current
        ticks = 0 if cur is None else -(-(cur.length - cur.index_at(step)) // cur.stride)  # its indices left
        if policy == "hold":
            then = "holding from this tick"
        elif ticks <= 0:
            then = "no chunk left to run: holding"
        else:
            then = f"running the current chunk out (up to {ticks} more ticks), then holding"
        log.warning("policy link lost at %s (no reply for %.1f s); on-link-loss %s: %s", time_of_day(),
                    self.link.silent_s(now), policy, then)  # fmt: skip
        if policy == "hold":  # what was planned from the running chunk is void too: start afresh when replies return
            self._drop_all("link_lost", "link_lost")

    def _link_restored(self) -> None:
        log.warning("policy link restored at %s after %.1f s without a reply", time_of_day(), self.link.outage_s)

    def _handle(self, message: Actions | Error | object, arrival_ns: int) -> None:
        self._ingest(message, arrival_ns)
        still_owed = (self.pending is not None and not self.pending.complete) or self._streaming is not None
        self.link.heard(arrival_ns, still_owed)

    def _ingest(self, message: Actions | Error | object, arrival_ns: int) -> None:
        open_requests = {r.chunk_id: r for r in (self.pending, self._streaming) if r is not None}
        if isinstance(message, Error):
            self._on_error(message, open_requests)
            return
        if not isinstance(message, Actions) or message.request_id not in open_requests:
            self.counts["stale"] += 1
            return
        req = open_requests[message.request_id]
        actions = np.asarray(message.actions, np.float32)
        h, j = req.actions.shape
        if actions.ndim != 2 or actions.shape[1] != j or not 0 <= message.start <= message.start + len(actions) <= h:
            self._warn_once("shape", f"reply {message.request_id}: actions {actions.shape} at {message.start} "
                            f"do not fit the chunk [{h}, {j}]; request abandoned")  # fmt: skip
            self._close(req, "error")
            self.counts["errors"] += 1
            return
        req.actions[message.start : message.start + len(actions)] = actions
        req.final[message.start : message.start + len(actions)] = True
        rec, age_ms = req.record, (arrival_ns - req.request_ns) / 1e6
        if message.final:  # completes the request (before the ready check below, which may ask `complete`)
            req.rows = message.start + len(actions)  # a final message carries rows [0, m)
        if rec.ready_ms is None and self._ready(req):
            rec.ready_ms = age_ms
            if self._measures_ready():
                self.delay.add(age_ms / 1e3)
        if message.final:
            if req is self._streaming and self.current is not None:
                self.current.rows = req.rows
            rec.latency_ms = self.last_latency_ms = age_ms
            rec.reply_step = rec.request_step + math.ceil(age_ms / 1e3 / self.period_s - 1e-9)
            rec.timing_ms = dict(message.timing_ms)
            rec.server_ms = message.timing_ms.get("total_ms")
            if not self._measures_ready():
                self.delay.add(age_ms / 1e3)
            if req is self._streaming:
                self._streaming = None

    def _ready(self, req: PendingRequest) -> bool:
        """Whether the action needed at the planned switch is final (this chunk's time to first action)."""
        return self._usable(req, req.record.planned_index)

    def _measures_ready(self) -> bool:
        """True: the delay estimate uses time-to-first-needed-action (faster), else the full latency."""
        return False

    def _on_error(self, error: Error, open_requests: dict[int, PendingRequest]) -> None:
        req = open_requests.get(error.request_id) if error.request_id is not None else self.pending
        if req is None:
            self.counts["stale"] += 1
            return
        dropped = error.code == ErrorCode.DROPPED
        self.counts["dropped" if dropped else "errors"] += 1
        self._warn_once(f"error:{error.code}", f"request {req.chunk_id}: server error {error.code}: {error.message}")
        self._close(req, "dropped" if dropped else "error")
        if not dropped:  # a failing server: do not ask again at the control rate
            self._back_off()

    def _close(self, req: PendingRequest, status: str) -> None:
        if req is self.pending:
            self.pending = None
            req.record.status = status
            self._retire(req.record)
        elif req is self._streaming:  # the running chunk keeps what arrived; missing indices starve
            self._streaming = None
            req.record.stream_cut = status

    def _expire(self, now: int) -> None:
        req = self.pending
        if req is not None and now - req.request_ns > self.config.request_timeout_s * 1e9:
            self.counts["timeouts"] += 1
            self._warn_once("timeout", f"request {req.chunk_id}: no reply in {self.config.request_timeout_s} s")
            self._close(req, "timeout")
        if self._streaming is not None and now - self._streaming.request_ns > self.config.request_timeout_s * 1e9:
            self._close(self._streaming, "timeout")
