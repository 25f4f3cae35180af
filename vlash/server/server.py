"""The policy server: a ROUTER socket owned by one thread, the model in another (`InferenceWorker`).

Socket thread: HELLO -> METADATA, INFER -> admitted (vlash.runtime.admission, as on every entry point) and queued
(newest request per client wins, within a cancel budget: vlash.server.jobs; the one it replaces gets ERROR DROPPED;
a new client's request with no place for it among ServerConfig.max_pending, shared fairly between ZeroMQ and
in-process clients, gets ERROR BUSY: vlash.server.shares), PING/RESET/STATS answered at once,
anything malformed -> ERROR and keep serving; replies produced by the model thread arrive on an inproc PULL
socket and are forwarded. A message past the size limits is read part by part and released as it is read
(robot_io.protocol.receive), then refused.

Model thread: takes up to `max_batch` pending requests of distinct clients at a time and runs them as one batch
(PolicyRuntime.stream); while fewer are pending it waits for more only as long as no robot loses a control
step by it (vlash.server.batching).

No input ends a serving thread: an exception while handling one message (socket thread) or one request (model
thread) is answered with ERROR INTERNAL, counted and logged, and the thread goes on. A thread that ends anyway
(an exception outside that handling: its socket or the queue failed) is not restarted in place, since what broke
is shared state a restart would inherit: the server fails as a whole. It stops serving (both threads end, so
clients time out and hold rather than wait on a half-alive server), `failure` holds the exception, `wait()`
returns and `on_failure` is called, so the process can exit non-zero and its supervisor restart it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import zmq

from robot_io.protocol import (
    Error,
    ErrorCode,
    Hello,
    Infer,
    Limits,
    MessageError,
    Metadata,
    OversizedMessage,
    Ping,
    Reset,
    Stats,
    bound_socket,
    decode,
    encode,
    receive,
)
from robot_io.protocol.errors import ProtocolError
from vlash.errors import ConfigError, ServerError
from vlash.runtime.admission import admit
from vlash.runtime.policy_runtime import PolicyRuntime
from vlash.server.batching import BatchGatherer, batch_limit
from vlash.server.config import ServerConfig
from vlash.server.curve import CurveServer
from vlash.server.jobs import BUSY, Job, JobQueue, ReplySink
from vlash.server.local_client import LocalClient
from vlash.server.stats import ServerStats
from vlash.server.worker import InferenceWorker

log = logging.getLogger(__name__)
MESSAGES_PER_WAKE = 64  # messages handled per poll wake-up on each socket (keeps both directions moving)


class PolicyServer:
    """Serve `runtime` over ZeroMQ. `start()` binds and returns the endpoint; `stop()` shuts down."""

    def __init__(
        self,
        runtime: PolicyRuntime,
        metadata: Metadata,
        config: ServerConfig | None = None,
        limits: Limits | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """`on_failure(exc)` runs (on the failing thread) when a serving thread ends unexpectedly: see the module
        docstring. `vlash serve` uses it to exit non-zero."""
        self.runtime, self.metadata = runtime, metadata
        self.config = config or ServerConfig()
        self.limits = limits or Limits()
        self.stats = ServerStats(self.config.latency_window)
        self.jobs = JobQueue(self.config.max_consecutive_cancels, self.config.max_pending)
        # requests run together: ServerConfig.max_batch, capped by an engine's fixed batch
        self.max_batch = batch_limit(runtime, self.config.max_batch)
        gatherer = BatchGatherer(self.max_batch, self.config.batch_wait_ms / 1e3, 1.0 / metadata.control_rate_hz)
        self._on_failure = on_failure
        self._failure: BaseException | None = None
        self.endpoint: str | None = None  # the bound endpoint (port resolved), set by start()
        self._context = zmq.Context()
        self._outbox = f"inproc://vlash-outbox-{uuid.uuid4().hex}"
        try:
            self._curve = CurveServer(self._context, self.config.curve_keys, self.config.allow_dir)
        except ConfigError:
            self._context.term()
            raise
        self._worker = InferenceWorker(
            runtime,
            self.jobs,
            self.stats,
            self._context,
            self._outbox,
            self.config.inject_latency_ms,
            self.config.warm_up_runs,
            on_failure=self._fail,
            gatherer=gatherer,
        )
        self._io = threading.Thread(target=self._io_main, name="vlash-socket", daemon=True)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    def start(self, timeout_s: float = 10.0) -> str:
        """Bind, start both threads, wait for the model thread's warm-up (ServerConfig.warm_up_runs; not
        bounded by `timeout_s`: a large model on a slow device may take minutes), return the endpoint."""
        if not self.config.is_local:
            log.warning("binding %s: reachable from other machines%s", self.config.bind, self._curve.note)
        self._curve.start()
        self._io.start()
        if not self._ready.wait(timeout_s) or self._startup_error is not None:
            self.stop()
            raise ConfigError(f"cannot bind {self.config.bind}: {self._startup_error or 'timed out'}")
        self._worker.start()
        self._worker.warmed.wait()
        if self._worker.warm_up_error is not None:
            self.stop()
            raise ServerError(f"warm-up failed: {self._worker.warm_up_error!r}") from self._worker.warm_up_error
        assert self.endpoint is not None
        return self.endpoint

    @property
    def warm_up_s(self) -> float:
        """Seconds the model thread's warm-up took (0 without one)."""
        return self._worker.warm_up_s

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving: cancel pending work, join the threads (bounded), close the sockets."""
        self._stop.set()
        self.jobs.close()
        self._worker.stop()
        for thread in (self._worker, self._io):
            if thread.is_alive():
                thread.join(timeout_s)
        self._curve.stop()
        if not self._io.is_alive() and not self._worker.is_alive():  # term() would block on open sockets
            self._context.term()

    @property
    def running(self) -> bool:
        return self._io.is_alive() and not self._stop.is_set()

    @property
    def failure(self) -> BaseException | None:
        """Why the server stopped on its own (a serving thread ended unexpectedly); None otherwise."""
        return self._failure

    def _fail(self, exc: BaseException) -> None:
        """A serving thread is ending unexpectedly: stop the whole server (see the module docstring)."""
        if self._failure is None:
            self._failure = exc
        log.critical("%s ended unexpectedly; the server stops", threading.current_thread().name, exc_info=exc)
        self._stop.set()
        self.jobs.close()
        self._worker.stop()
        if self._on_failure is not None:
            self._on_failure(exc)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until stopped (True) or `timeout_s` passes (False)."""
        return self._stop.wait(timeout_s)

    def local_client(self, timeout_s: float = 5.0, name: str = "") -> LocalClient:
        """A client in this process (the openpi endpoint's connections): its requests go straight into the queue
        (`submit`, the path remote ones take after decoding) and its replies come back as message objects, never
        encoded. One per thread; close it when done."""
        return LocalClient(self, timeout_s, name)

    # --- what every client does, remote (socket thread) or in process (LocalClient) -----------------------------
    def hello(self, client: bytes, name: str) -> Metadata:
        self.stats.client(client)
        self.stats.count("hellos")
        log.info("client %s (%s) connected", client.hex(), name[:64])
        return self.metadata

    def reset(self, client: bytes) -> None:
        self.jobs.reset(client)
        self.stats.count("resets")

    def submit(self, client: bytes, infer: Infer, local: ReplySink | None = None) -> list[Error]:
        """Admit and queue one INFER of `client` (`local`: an in-process client's replies, its INFER made in process;
        None: decoded from the socket); the ERRORs to send it now, counted: its own refusal (admission's BAD_VALUE
        and the like, BUSY), or DROPPED for the pending request it replaced."""
        self.stats.client(client)
        try:
            infer = admit(infer, self.metadata, self.limits, decoded=local is None)
        except MessageError as exc:
            return [self._refusal(exc.code, exc.detail, infer.request_id)]
        if self._stop.is_set():
            return [self._refusal(ErrorCode.BUSY, "server is shutting down", infer.request_id)]
        job = Job(client, infer, local)
        refusals = []
        for old in self.jobs.submit(job):
            if old is job and old.reason == BUSY:  # refused: no place for it (vlash.server.shares)
                self.stats.count("busy")
                self.stats.count(f"busy_{job.transport}")
                text = f"server busy: {len(self.jobs)} requests waiting, no place for a new client's; try again"
                refusals.append(self._refusal(ErrorCode.BUSY, text, infer.request_id))
            elif old is job:  # refused: the queue is closed
                refusals.append(self._refusal(ErrorCode.BUSY, "server is shutting down", infer.request_id))
            else:
                text = "superseded by a newer request"
                refusals.append(self._refusal(ErrorCode.DROPPED, text, old.infer.request_id))
        return refusals

    def _refusal(self, code: ErrorCode, text: str, request_id: int | None) -> Error:
        self.stats.count("dropped" if code is ErrorCode.DROPPED else "errors")  # counted before the client sees it
        return Error(code, text[:1000], request_id)

    def counters(self) -> dict[str, int | float]:
        return self.stats.snapshot(pending=len(self.jobs))

    def __enter__(self) -> PolicyServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- socket thread -------------------------------------------------------------------------------
    def _io_main(self) -> None:
        router = self._context.socket(zmq.ROUTER)
        pull = self._context.socket(zmq.PULL)
        try:
            for socket in (router, pull):
                socket.setsockopt(zmq.LINGER, 0)
            bound_socket(router, self.limits)
            self._curve.configure(router)
            router.bind(self.config.bind)
            endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
            pull.bind(self._outbox)
        except zmq.ZMQError as exc:
            router.close(linger=0)
            pull.close(linger=0)
            self._startup_error = exc
            self._ready.set()
            return
        self.endpoint = endpoint
        self._ready.set()
        try:
            self._loop(router, pull)
        except BaseException as exc:  # noqa: BLE001 - not one message's handling (guarded): the server fails
            self._fail(exc)
        finally:
            router.close(linger=0)
            pull.close(linger=0)

    def _loop(self, router: zmq.Socket, pull: zmq.Socket) -> None:
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(pull, zmq.POLLIN)
        while not self._stop.is_set():
            events = dict(poller.poll(self.config.poll_ms))
            if pull in events:
                for _ in range(MESSAGES_PER_WAKE):
                    try:
                        frames = pull.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._send_frames(router, frames)
            if router in events:
                self._serve_batch(router)

    def _serve_batch(self, router: zmq.Socket) -> None:
        """Handle the messages waiting on the ROUTER (at most MESSAGES_PER_WAKE). Nothing is kept once this returns:
        a refused message's memory goes back at once, not when the next message arrives."""
        for _ in range(MESSAGES_PER_WAKE):
            try:
                client, *frames = receive(router, self.limits, zmq.NOBLOCK, envelope=1)
            except zmq.Again:
                return
            except OversizedMessage as exc:  # read to its end, every part already released
                self._error(router, exc.envelope[0], exc.code, exc.detail, None)
                continue
            self._handle_guarded(router, client.bytes, frames)

    def _handle_guarded(self, router: zmq.Socket, client: bytes, frames: list[Any]) -> None:
        """Handle one message; an exception that escapes (a bug) is answered INTERNAL, never the end of the
        thread that serves every client."""
        try:
            self._handle(router, client, frames)
        except Exception:  # noqa: BLE001 - answered, counted and logged; the next message is served as usual
            log.exception("handling a message from client %s failed", client.hex())
            self._error(router, client, ErrorCode.INTERNAL, "the server failed handling this message", None)

    @staticmethod
    def _send_frames(router: zmq.Socket, frames: list[Any]) -> None:
        try:
            router.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.ZMQError as exc:  # client gone or not reading: its replies are dropped
            log.debug("reply not sent: %s", exc)

    def _reply(self, router: zmq.Socket, client: bytes, message: Any) -> None:
        self._send_frames(router, [client, *encode(message)])  # the server's own messages

    def _error(self, router: zmq.Socket, client: bytes, code: ErrorCode, text: str, request_id: int | None) -> None:
        self._reply(router, client, self._refusal(code, text, request_id))

    def _handle(self, router: zmq.Socket, client: bytes, frames: list[Any]) -> None:
        try:
            message = decode(frames, self.limits)
        except MessageError as exc:
            self._error(router, client, exc.code, exc.detail, None)
            return
        except ProtocolError as exc:
            self._error(router, client, ErrorCode.BAD_MESSAGE, str(exc), None)
            return
        self.stats.client(client)
        if isinstance(message, Infer):
            for refusal in self.submit(client, message):
                self._reply(router, client, refusal)
        elif isinstance(message, Hello):
            self._reply(router, client, self.hello(client, message.client))
        elif isinstance(message, Ping):
            self._reply(router, client, Ping(message.sent_ns, time.time_ns()))
        elif isinstance(message, Reset):
            self.reset(client)
            self._reply(router, client, Reset())
        elif isinstance(message, Stats):
            self._reply(router, client, Stats(self.counters()))
        else:
            kind = type(message).__name__.upper()
            self._error(router, client, ErrorCode.BAD_MESSAGE, f"a client may not send {kind}", None)
