"""The model thread: takes batches of jobs from the queue (one job per client, gathered by
vlash.server.batching), runs each batch through `PolicyRuntime.stream` and answers each job from its row's events:
encoded frames to the socket thread through an inproc PUSH socket, or message objects to an in-process client.

Each robot of a batch gets its own replies: partial ACTIONS as its rows become final, then its final ACTIONS as soon
as its request is over (an early-stopped request does not wait for the rest of its batch). Every job (unless reset
or shut down) ends in one last reply and one count: a final ACTIONS ("served"), or an ERROR ("errors"; "dropped"
when superseded). A job that fails fails alone: a request the policy refuses (BAD_VALUE), a chunk the protocol
refuses (a diverged model's NaN or inf: INTERNAL) or a cancelled one is dropped from its batch and the other rows
go on. An exception that fails the whole batch is INTERNAL to each of its robots; nothing a batch does ends this
thread. An exception outside a batch (the queue, the socket) ends the thread; the server then stops (see
vlash.server.server).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import zmq

from robot_io.protocol import Actions, Error, ErrorCode, MessageError, encode
from vlash.runtime.loading import warm_up
from vlash.runtime.policy_runtime import PolicyRuntime
from vlash.runtime.request import Cancelled, ChunkResult, RowEvent
from vlash.server.batching import BatchGatherer
from vlash.server.failures import MAX_ERROR_CHARS, BadOutput, check_finite, request_error
from vlash.server.jobs import SUPERSEDED, Job, JobQueue
from vlash.server.stats import ServerStats

log = logging.getLogger(__name__)
Frames = list[bytes | memoryview]  # an encoded message (robot_io.protocol.encode)


@dataclass(eq=False)
class _Row:
    """A job in the batch that runs it: what the model thread learns about it, the model thread's alone (the socket
    thread sees only the Job)."""

    job: Job
    queue_ms: float  # receipt -> batch start
    needed: int = 0  # leading rows of the chunk it asks for (PolicyRuntime.rows_needed)
    failure: Exception | None = None  # why it cannot go on (its rows do not fit, a partial ACTIONS refused): dropped
    answered: bool = False  # its last reply went out
    injected_ms: float = 0.0  # emulated device time spent while it ran (--inject-latency)

    @property
    def live(self) -> bool:
        """Still running in its batch: not answered, not failed, not cancelled."""
        return not self.answered and self.failure is None and not self.job.cancelled.is_set()


class InferenceWorker(threading.Thread):
    def __init__(
        self,
        runtime: PolicyRuntime,
        jobs: JobQueue,
        stats: ServerStats,
        context: zmq.Context,
        outbox: str,
        inject_latency_ms: float = 0.0,
        warm_up_runs: int = 0,
        on_failure: Callable[[BaseException], None] | None = None,
        gatherer: BatchGatherer | None = None,
    ) -> None:
        """`on_failure(exc)` runs on this thread if it ends by an exception while serving (not at warm-up).
        `gatherer`: how batches are gathered (None: one request at a time)."""
        super().__init__(name="vlash-model", daemon=True)
        self.runtime, self.jobs, self.stats = runtime, jobs, stats
        self.gatherer = gatherer or BatchGatherer(max_batch=1, batch_wait_s=0.0, control_period_s=1.0)
        self._context, self._outbox = context, outbox
        # emulated device time per stage (prefill + each step), spent once per stage of a batch
        self._stage_s = inject_latency_ms / 1e3 / (runtime.num_steps + 1)
        self._stopping = threading.Event()
        self._push: zmq.Socket | None = None
        self._warm_up_runs = warm_up_runs
        self._on_failure = on_failure
        self.warmed = threading.Event()  # set once the warm-up ran (or failed: see warm_up_error)
        self.warm_up_s = 0.0
        self.warm_up_error: BaseException | None = None

    def stop(self) -> None:
        self._stopping.set()

    def _warm_up(self) -> None:
        """Run the warm-up requests on this thread: the one that serves (see ServerConfig.warm_up_runs)."""
        try:
            if self._warm_up_runs:  # static programs (CUDA graphs) are built per batch size: every size served
                sizes = range(1, self.gatherer.max_batch + 1) if self.runtime.engine.span_granularity else (1,)
                self.warm_up_s = warm_up(self.runtime, self._warm_up_runs, sizes)
        except Exception as exc:  # start() reports it; the thread ends
            self.warm_up_error = exc
        finally:
            self.warmed.set()

    def run(self) -> None:
        self._warm_up()
        if self.warm_up_error is not None:
            return
        try:
            self._serve_forever()
        except BaseException as exc:  # noqa: BLE001 - outside a job (each job is guarded): the server decides
            if self._on_failure is None:
                raise
            self._on_failure(exc)

    def _serve_forever(self) -> None:
        self._push = self._context.socket(zmq.PUSH)
        self._push.setsockopt(zmq.LINGER, 0)
        self._push.connect(self._outbox)
        try:
            while not self._stopping.is_set():
                batch = self.jobs.take_batch(
                    self.gatherer.max_batch, 0.1, gather=self.gatherer, shared_max=self.gatherer.shared_size()
                )
                try:
                    if batch:
                        self._serve_batch(batch)
                finally:
                    for job in batch:
                        self.jobs.done(job)
        finally:
            self._push.close(linger=0)

    def _serve_batch(self, jobs: list[Job]) -> None:
        """Serve one batch. An exception that fails the whole batch (the model, a bug, a reply that cannot be
        built) is INTERNAL to each of its robots, never the end of the thread that serves every client."""
        start_ns = time.monotonic_ns()
        rows = [_Row(job, (start_ns - job.received_ns) / 1e6) for job in jobs]
        for row in rows:
            try:  # H, or fewer rows for a horizon-aware request with an execution horizon (the sampler stops early)
                row.needed = self.runtime.rows_needed(row.job.infer)
            except ValueError as exc:  # the request does not fit the policy: BAD_VALUE, it never enters the batch
                row.failure = exc
        self.stats.batch([row.queue_ms for row in rows])
        try:
            for event in self.runtime.stream([job.infer for job in jobs], lambda i: not rows[i].live, self._pace(rows)):
                self._event(rows[event.row], event)
        except Exception as exc:  # noqa: BLE001 - answered and counted; the next batch is served as usual
            log.exception("a batch of %d requests failed", len(jobs))
            for row in rows:  # a job cancelled meanwhile ends as cancelled (DROPPED if superseded), not INTERNAL
                self._answer(row, Cancelled(row.job.reason) if row.job.cancelled.is_set() else exc)
        else:
            self.gatherer.measured(len(jobs), (time.monotonic_ns() - start_ns) / 1e9)

    def _event(self, row: _Row, event: RowEvent[np.ndarray, ChunkResult]) -> None:
        """A row's event: its partial ACTIONS (the final one carries the rest), or its last reply."""
        if event.result is not None:
            self._answer(row, row.failure or event.result)  # a job whose partial ACTIONS failed ends with that
            return
        assert event.actions is not None
        if row.failure is None and event.stop < row.needed:
            elapsed = {"elapsed_ms": (time.monotonic_ns() - row.job.received_ns) / 1e6}
            try:
                self._send(row.job, self._actions(row.job, event.start, event.actions, False, elapsed))
            except BadOutput as exc:  # this robot only: its row leaves the batch before the next step
                row.failure = exc

    def _pace(self, rows: list[_Row]) -> Callable[[int], None] | None:
        """Emulated device time (--inject-latency-ms): one stage for the prefill, one per denoise step, cut short once
        no job is left running; each job running counts what was spent (its reply's `injected_ms`)."""
        if self._stage_s <= 0:
            return None

        def pace(steps: int) -> None:
            start = time.monotonic()
            deadline = start + self._stage_s * max(steps, 1)
            while (left := deadline - time.monotonic()) > 0:
                live = [row for row in rows if row.live]
                if not live:
                    break
                live[0].job.cancelled.wait(left)
            spent_ms = (time.monotonic() - start) * 1e3
            for row in rows:
                row.injected_ms += spent_ms if row.live else 0.0

        return pace

    def _answer(self, row: _Row, outcome: ChunkResult | Exception) -> None:
        """The last reply of one robot of the batch, once. An exception that escapes (a bug, a reply that cannot
        be built) is this robot's INTERNAL error, and the other robots are answered as usual."""
        if row.answered:
            return
        row.answered = True
        try:
            self._finish(row, outcome)
        except Exception as exc:  # noqa: BLE001 - answered and counted
            job = row.job
            log.exception("request %d of client %s failed outside the model", job.infer.request_id, job.client.hex())
            self._error(job, ErrorCode.INTERNAL, f"the server failed serving this request: {type(exc).__name__}")

    def _finish(self, row: _Row, outcome: ChunkResult | Exception) -> None:
        """The last reply of one robot: its final ACTIONS or its ERROR (nothing after a reset or shutdown)."""
        job = row.job
        if isinstance(outcome, Cancelled):
            if job.reason == SUPERSEDED:
                self._error(job, ErrorCode.DROPPED, "superseded by a newer request of the same client")
            return
        if isinstance(outcome, Exception):
            self._fail(job, outcome)
            return
        timing = {"queue_ms": row.queue_ms, **outcome.timing_ms}
        timing.update({f"step_{i}_ms": ms for i, ms in enumerate(outcome.step_ms)})
        timing["server_ms"] = (time.monotonic_ns() - job.received_ns) / 1e6
        if self._stage_s > 0:  # of which emulated (--inject-latency-ms): what a slower device would have added
            timing["injected_ms"] = row.injected_ms
        first_action_ms = row.queue_ms + outcome.timing_ms["first_action_ms"]
        # rows [0, final_rows): the whole chunk, or the rows an early stop left final (docs/PROTOCOL.md, ACTIONS)
        final = self._actions(job, 0, outcome.actions[: outcome.final_rows], True, timing)
        try:
            frames = self._checked(job, final)  # served only once it can be sent
        except BadOutput as exc:
            self._fail(job, exc)
            return
        self.stats.served(timing["server_ms"], first_action_ms, job.client)  # counted before the client sees it
        self._deliver(job, final, frames)

    def _fail(self, job: Job, exc: Exception) -> None:
        """The ERROR for a job that failed with `exc` (a diverged model's BadOutput included: the client holds, its
        next request may well be fine); the server keeps serving."""
        code, text = request_error(exc)
        if code is ErrorCode.INTERNAL:
            log.error("request %d failed: %s", job.infer.request_id, text)
        self._error(job, code, text)

    def _send(self, job: Job, message: Actions | Error) -> None:
        self._deliver(job, message, self._checked(job, message))

    def _deliver(self, job: Job, message: Actions | Error, frames: Frames | None) -> None:
        """A checked reply to its client: the message itself to an in-process client, its frames on the socket."""
        if job.local is not None:
            job.local(message)
            return
        assert frames is not None and self._push is not None
        self._push.send_multipart([job.client, *frames], copy=False)

    @staticmethod
    def _checked(job: Job, message: Actions | Error) -> Frames | None:
        """BadOutput unless `message` may go to the client (the protocol refuses the model's actions, e.g. NaN or
        inf); for a client on the socket, the message's frames (encoded once, not decoded again to check them),
        None for an in-process client (it gets the message itself)."""
        if isinstance(message, Actions):
            check_finite(message.actions)
        if job.local is not None:
            return None
        try:
            return encode(message)
        except MessageError as exc:
            raise BadOutput(f"the model's chunk cannot be sent: {exc.detail}") from exc

    def _actions(self, job: Job, start: int, actions: np.ndarray, final: bool, timing: dict[str, float]) -> Actions:
        infer = job.infer
        return Actions(infer.request_id, start, actions, final, self.runtime.horizon, infer.step_index, timing)

    def _error(self, job: Job, code: ErrorCode, message: str) -> None:
        self.stats.count("dropped" if code is ErrorCode.DROPPED else "errors")  # counted before the client sees it
        self._send(job, Error(code, message[:MAX_ERROR_CHARS], job.infer.request_id))
