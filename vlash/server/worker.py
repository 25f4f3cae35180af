"""The model thread: takes jobs from the queue, runs them through the `PolicyRuntime` and hands the
replies (encoded frames) to the socket thread through an inproc PUSH socket.

Every job (unless reset or shut down) ends in one last reply and one count: a final ACTIONS ("served"), or an ERROR
("errors"; "dropped" when superseded). Nothing a job does ends this thread: a chunk the protocol refuses (a
diverged model's NaN or inf) is an INTERNAL error, and any other exception while serving a job is answered INTERNAL
too. An exception outside a job (the queue, the socket) ends the thread; the server then stops (see
vlash.server.server).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np
import zmq

from robot_io.protocol import Actions, Error, ErrorCode, MessageError, encode
from vlash.runtime.loading import warm_up
from vlash.runtime.policy_runtime import ChunkRequest, PolicyRuntime
from vlash.server.jobs import SUPERSEDED, Job, JobQueue
from vlash.server.stats import ServerStats

log = logging.getLogger(__name__)


MAX_ERROR_CHARS = 1000  # ERROR messages are cut to this (the protocol refuses text over Limits.max_prompt_chars)


class Cancelled(Exception):
    """Raised inside a running request once its job is cancelled (superseded, reset, shutdown)."""


class BadOutput(Exception):
    """The model's output cannot be sent: not finite (the model diverged), or refused by the protocol."""


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
    ) -> None:
        """`on_failure(exc)` runs on this thread if it ends by an exception while serving (not at warm-up)."""
        super().__init__(name="vlash-model", daemon=True)
        self.runtime, self.jobs, self.stats = runtime, jobs, stats
        self._context, self._outbox = context, outbox
        self._stage_s = inject_latency_ms / 1e3 / (runtime.num_steps + 1)  # prefill + each step
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
            if self._warm_up_runs:
                self.warm_up_s = warm_up(self.runtime, self._warm_up_runs)
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
                job = self.jobs.take(timeout_s=0.1)
                if job is not None:
                    try:
                        self._serve_guarded(job)
                    finally:
                        self.jobs.done(job)
        finally:
            self._push.close(linger=0)

    def _serve_guarded(self, job: Job) -> None:
        """Serve one job; an exception that escapes it (a bug, a reply that cannot be built) is this job's
        INTERNAL error, never the end of the thread that serves every client."""
        try:
            self._serve(job)
        except Exception as exc:  # noqa: BLE001 - answered and counted; the next job is served as usual
            log.exception("request %d of client %s failed outside the model", job.infer.request_id, job.client.hex())
            self._error(job, ErrorCode.INTERNAL, f"the server failed serving this request: {type(exc).__name__}")

    def _send(self, job: Job, message: Actions | Error) -> None:
        self._send_frames(job, self._encode(message))

    def _send_frames(self, job: Job, frames: list) -> None:
        assert self._push is not None
        self._push.send_multipart([job.client, *frames], copy=False)

    @staticmethod
    def _encode(message: Actions | Error) -> list:
        """The frames of a reply; BadOutput when the protocol refuses the model's actions (e.g. NaN or inf)."""
        if isinstance(message, Actions) and not np.isfinite(message.actions).all():
            raise BadOutput("the model returned NaN or inf actions (it diverged); no chunk was sent")
        try:
            return encode(message)
        except MessageError as exc:
            raise BadOutput(f"the model's chunk cannot be sent: {exc.detail}") from exc

    def _hook(self, job: Job) -> object:
        def hook(stage: str) -> None:
            if self._stage_s > 0:
                job.cancelled.wait(self._stage_s)  # emulated device time, cut short by a cancel
            if job.cancelled.is_set():
                raise Cancelled(job.reason)

        return hook

    def _serve(self, job: Job) -> None:
        infer = job.infer
        queue_ms = (time.monotonic_ns() - job.received_ns) / 1e6
        request = ChunkRequest.from_infer(infer)
        try:
            # H, or fewer rows for a horizon-aware request with an execution horizon (the sampler stops early)
            needed = self.runtime.rows_needed(request)
            stream = self.runtime.stream(request, self._hook(job))
            for piece in stream:
                if piece.start + len(piece.actions) < needed:  # the final message carries the rest
                    elapsed = {"elapsed_ms": (time.monotonic_ns() - job.received_ns) / 1e6}
                    self._send(job, self._actions(job, piece.start, piece.actions, False, elapsed))
            result = stream.result
            timing = {"queue_ms": queue_ms, **result.timing_ms}
            timing.update({f"step_{i}_ms": ms for i, ms in enumerate(result.step_ms)})
            timing["server_ms"] = (time.monotonic_ns() - job.received_ns) / 1e6
            first_action_ms = queue_ms + result.timing_ms["first_action_ms"]
            # rows [0, final_rows): the whole chunk, or the rows an early stop left final (docs/PROTOCOL.md, ACTIONS)
            rows = result.actions[: result.final_rows]
            final = self._encode(self._actions(job, 0, rows, True, timing))  # served only once it encodes
        except Cancelled:
            if job.reason == SUPERSEDED:
                self._error(job, ErrorCode.DROPPED, "superseded by a newer request of the same client")
            return
        except BadOutput as exc:  # a diverged model: the client holds, the next request may well be fine
            log.error("request %d: %s", infer.request_id, exc)
            self._error(job, ErrorCode.INTERNAL, str(exc))
            return
        except ValueError as exc:  # ShapeError included: the request does not fit the policy
            self._error(job, ErrorCode.BAD_VALUE, str(exc))
            return
        except Exception as exc:  # the server keeps serving; the client learns the request failed
            log.exception("request %d failed", infer.request_id)
            self._error(job, ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
            return
        self.stats.served(timing["server_ms"], first_action_ms)  # counted before the client sees the reply
        self._send_frames(job, final)

    def _actions(self, job: Job, start: int, actions, final: bool, timing: dict[str, float]) -> Actions:
        infer = job.infer
        return Actions(infer.request_id, start, actions, final, self.runtime.horizon, infer.step_index, timing)

    def _error(self, job: Job, code: ErrorCode, message: str) -> None:
        self.stats.count("dropped" if code is ErrorCode.DROPPED else "errors")  # counted before the client sees it
        self._send(job, Error(code, message[:MAX_ERROR_CHARS], job.infer.request_id))
