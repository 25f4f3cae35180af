"""PolicyClient: the robot's end of the policy link (one ZeroMQ DEALER socket, bounded waits everywhere).

Not thread-safe: use one client from one thread (the control loop's). Every wait has a deadline; when a
reply that must come does not, the socket is dropped (LINGER 0) and the next call reconnects, so a
restarted server is picked up without retrying forever.

`submit` and `poll(0)` never wait on the network, so a control loop calling them keeps its deadlines even
while the server is down: after a drop, `submit` opens a new socket and sends HELLO and the INFER back to
back (the server does not require the handshake first); the METADATA reply is taken by `poll` when it comes.
Only `connect`, `infer`, `ping`, `reset` and `stats` block (up to timeout_s): call them at setup.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque

import zmq

from robot_io.protocol import (
    PROTOCOL_VERSION,
    Actions,
    Error,
    Hello,
    Infer,
    Limits,
    Message,
    MessageError,
    Metadata,
    Ping,
    RemoteError,
    Reset,
    Stats,
    bound_socket,
    decode,
    encode,
    receive,
)
from robot_io.protocol.curve import CurveClientKeys
from robot_io.protocol.endpoints import check_endpoint
from robot_io.protocol.errors import DeadlineExceeded, ProtocolError

log = logging.getLogger(__name__)


class PolicyClient:
    """Talks to a vlash policy server: HELLO -> METADATA handshake, then INFER -> streamed ACTIONS.

    `counters`: "stale" (replies for unknown, finished or pre-reset requests, dropped), "bad" (undecodable
    replies, dropped), "resets" (connections dropped after a timeout), "sent" (INFER messages sent),
    "handshakes" (METADATA replies accepted, blocking or not).
    """

    def __init__(
        self,
        endpoint: str,
        timeout_s: float = 5.0,
        client_name: str = "",
        curve: CurveClientKeys | None = None,
        limits: Limits | None = None,
        context: zmq.Context | None = None,
        validate_requests: bool = False,
    ) -> None:
        check_endpoint(endpoint)  # EndpointError (a ValueError) before any socket exists
        if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        self.endpoint, self.timeout_s, self.client_name, self.curve = endpoint, float(timeout_s), client_name, curve
        self.limits = limits or Limits()
        self.validate_requests = validate_requests  # also decode each request before sending (the server checks anyway)
        self._context = context or zmq.Context.instance()
        self._socket: zmq.Socket | None = None
        self._metadata: Metadata | None = None
        self._pending: dict[int, int] = {}  # request id -> monotonic ns of its submit or latest reply
        self._inbox: deque[Actions | Error] = deque()  # replies that arrived during a blocking call
        self._hello_pending = False  # a HELLO went out from submit(); its METADATA is taken on receipt
        self.counters = {"stale": 0, "bad": 0, "resets": 0, "sent": 0, "handshakes": 0}

    # -- connection -----------------------------------------------------------------------------------

    def connect(self) -> Metadata:
        """Handshake (HELLO -> METADATA) within timeout_s; raises DeadlineExceeded or RemoteError. For a server that
        may still be starting: robot_io.server_wait.wait_for_server."""
        if self._socket is None:
            self._open()
        self._hello_pending = False  # this call takes the next METADATA itself
        metadata = self._call(Hello(client=self.client_name), Metadata)
        self._accept_metadata(metadata)
        return metadata

    def send_hello(self) -> None:
        """Send HELLO without waiting (on a new socket if there is none); `poll` takes the METADATA reply and counts
        it in counters["handshakes"]. For waiting on a server that is still starting: robot_io.server_wait."""
        if self._socket is None:
            self._open()
        self._send_frames(encode(Hello(client=self.client_name), self.limits))
        self._hello_pending = True

    @property
    def metadata(self) -> Metadata:
        """The server's latest METADATA (handshakes first if none was ever received; kept across reconnects)."""
        return self._metadata if self._metadata is not None else self.connect()

    @property
    def pending(self) -> tuple[int, ...]:
        """Request ids submitted and not finished (no final ACTIONS or ERROR yet)."""
        return tuple(self._pending)

    def close(self) -> None:
        self._close_socket()
        self._metadata = None

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests -------------------------------------------------------------------------------------

    def submit(self, infer: Infer) -> None:
        """Send a request without waiting for anything; raises DeadlineExceeded only if the send queue is full.

        Without a connection (first use, or dropped after a timeout) a new socket is opened and HELLO goes out
        just before the request; `poll` takes the METADATA reply. The frames are copied into ZeroMQ's buffers
        before this returns, so the caller may reuse its image buffers at once (see `_send_frames`).
        """
        frames = encode(infer, self.limits, validate=self.validate_requests)  # MessageError before any I/O
        if self._socket is None:
            self.send_hello()
        self._send_frames(frames)
        self._pending[infer.request_id] = time.monotonic_ns()
        self.counters["sent"] += 1

    def poll(self, timeout_s: float = 0.0) -> Actions | Error | None:
        """The next reply to a pending request, or None if none arrives within timeout_s.

        Raises DeadlineExceeded (and drops the connection and the pending requests) when the oldest pending
        request has had no reply for the client's timeout_s.
        """
        if self._inbox:
            return self._inbox.popleft()
        if self._socket is None:
            return None
        deadline = time.monotonic_ns() + int(max(timeout_s, 0.0) * 1e9)
        while (message := self._receive(deadline)) is not None:
            if self._is_reply(message):
                self._settle(message)
                return message
            self._count_stale(message)
        self._check_overdue()
        return None

    def infer(self, infer: Infer, timeout_s: float | None = None) -> Actions:
        """Submit and wait for the final ACTIONS (partial ones are skipped); raises RemoteError on an ERROR."""
        self.submit(infer)
        rid = infer.request_id

        def is_final(message: Message) -> bool:
            return (
                isinstance(message, Actions | Error)
                and message.request_id == rid
                and (isinstance(message, Error) or message.final)
            )

        reply = self._await(is_final, timeout_s, f"final ACTIONS for request {rid}")
        if self._inbox:  # its partial ACTIONS
            self._inbox = deque(m for m in self._inbox if m.request_id != rid)
        if isinstance(reply, Error):
            raise RemoteError(reply)
        return reply

    def ping(self) -> float:
        """Round trip to the server in milliseconds."""
        start = time.perf_counter()
        sent_ns = time.time_ns()
        self._call(Ping(sent_ns=sent_ns), Ping, lambda m: m.sent_ns == sent_ns)
        return (time.perf_counter() - start) * 1e3

    def reset(self) -> None:
        """Ask the server to forget this client's pending work; replies to earlier requests are dropped."""
        self._call(Reset(), Reset)
        self._pending.clear()
        self._inbox.clear()

    def stats(self) -> dict[str, int | float]:
        return self._call(Stats(), Stats).counters

    # -- internals ------------------------------------------------------------------------------------

    def _open(self) -> None:
        socket = self._context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        bound_socket(socket, self.limits)  # a frame above the limits drops the connection before it is buffered
        if self.curve is not None:
            self.curve.apply(socket)
        socket.connect(self.endpoint)
        self._socket = socket

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
        self._socket, self._hello_pending = None, False

    def _drop_connection(self) -> None:
        """Close the socket (LINGER 0) and forget everything in flight; the next call reconnects."""
        self._close_socket()
        self._pending.clear()
        self._inbox.clear()
        self.counters["resets"] += 1

    def _accept_metadata(self, metadata: Metadata) -> None:
        """Take a METADATA reply: refuse another protocol version, warn when the policy's shapes changed."""
        if metadata.version != PROTOCOL_VERSION:
            self._drop_connection()
            raise ProtocolError(f"server speaks protocol {metadata.version}, this client {PROTOCOL_VERSION}")
        old = self._metadata
        shape = ("state_dim", "action_dim", "chunk_length", "cameras")
        if old is not None and any(getattr(old, k) != getattr(metadata, k) for k in shape):
            log.warning("server at %s now serves %s with different shapes than %s", self.endpoint,
                        metadata.model_id, old.model_id)  # fmt: skip
        self._metadata = metadata
        self.counters["handshakes"] += 1

    def _send_frames(self, frames: list) -> None:
        # copy=True: a memcpy of the images (~20 us for 2 x 224^2 RGB) is cheaper than pyzmq's zero-copy send,
        # whose buffer release goes through a garbage-collector thread; tools/bench_transport.py measures both.
        try:
            self._socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=True)
        except zmq.Again:
            raise DeadlineExceeded(f"send queue to {self.endpoint} is full") from None

    def _call(self, request: Message, reply_type: type, match=None) -> Message:
        """Send a control request and wait for its reply, keeping request replies that arrive meanwhile."""
        if self._socket is None or (self._metadata is None and not isinstance(request, Hello)):
            self.connect()
        self._send_frames(encode(request, self.limits))

        def is_reply(message: Message) -> bool:
            if isinstance(message, Error) and message.request_id is None:
                return True
            return isinstance(message, reply_type) and (match is None or match(message))

        reply = self._await(is_reply, None, f"{type(request).__name__.upper()} reply")
        if isinstance(reply, Error):
            raise RemoteError(reply)
        return reply

    def _await(self, wanted, timeout_s: float | None, what: str) -> Message:
        """The first message satisfying `wanted` before the deadline; other replies go to the inbox."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic_ns() + int(timeout * 1e9)
        while (message := self._receive(deadline)) is not None:
            live = self._is_reply(message)
            if live:
                self._settle(message)
            if wanted(message):
                return message
            if live:
                self._inbox.append(message)
            else:
                self._count_stale(message)
        self._drop_connection()
        raise DeadlineExceeded(f"no {what} from {self.endpoint} within {timeout:.3g} s; connection reset")

    def _receive(self, deadline_ns: int) -> Message | None:
        """Next decodable message before the deadline, else None."""
        while True:
            remaining_ms = math.ceil((deadline_ns - time.monotonic_ns()) / 1e6)
            if not self._socket.poll(max(remaining_ms, 0)):  # poll(0): one non-blocking check
                if time.monotonic_ns() >= deadline_ns:
                    return None
                continue
            message = self._decode_next()
            if message is None:
                continue
            if self._hello_pending and isinstance(message, Metadata):  # the reply to submit()'s HELLO
                self._hello_pending = False
                self._accept_metadata(message)
                continue
            return message

    def _decode_next(self) -> Message | None:
        """The waiting message, decoded; None (counted "bad") when it cannot be. Whatever the server sent, the
        robot holds and goes on: decode refuses bad input with MessageError, and any other exception it might
        raise on hostile bytes is a bad reply too, never a crash of the control loop."""
        try:
            frames = receive(self._socket, self.limits)
            return decode(frames, self.limits)
        except MessageError as exc:  # OversizedMessage included: read to its end and released
            reason = str(exc)
        except zmq.ZMQError:  # the socket failed, not the reply: the caller's error handling applies
            raise
        except Exception as exc:  # noqa: BLE001 - untrusted bytes: a decoder bug must not stop the robot
            reason = f"{type(exc).__name__} while decoding"
        self.counters["bad"] += 1
        log.warning("dropping undecodable reply from %s: %s", self.endpoint, reason[:200])
        return None

    def _is_reply(self, message: Message) -> bool:
        if isinstance(message, Actions | Error):
            return message.request_id in self._pending or message.request_id is None
        return False

    def _settle(self, message: Actions | Error) -> None:
        if message.request_id is None:
            return
        if isinstance(message, Error) or message.final:
            self._pending.pop(message.request_id, None)
        else:
            self._pending[message.request_id] = time.monotonic_ns()

    def _count_stale(self, message: Message) -> None:
        self.counters["stale"] += 1
        log.debug("dropping stale %s", type(message).__name__)

    def _check_overdue(self) -> None:
        if self._pending and time.monotonic_ns() - min(self._pending.values()) > self.timeout_s * 1e9:
            oldest = min(self._pending, key=self._pending.get)
            self._drop_connection()
            raise DeadlineExceeded(
                f"request {oldest}: no reply from {self.endpoint} within {self.timeout_s:.3g} s; connection reset"
            )
