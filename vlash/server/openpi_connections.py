"""The openpi endpoint's connections (vlash.server.openpi_endpoint): how many may be open at once, and websockets'
log of a connection that fails on its own.

Each open connection of websockets' threaded server holds three threads (its handler, its reader and its keepalive)
and its buffers, for as long as the robot keeps it open, idle or not. `ConnectionCap` bounds them: past
OpenpiConfig.max_connections, a new connection is refused in its handshake (HTTP 503, counted) and its thread ends
at once. A connection that stopped answering (keepalive pings unanswered, its close not acknowledged) is a robot gone,
not a bug: `ConnectionLog` logs it in one line, where websockets logs a full traceback at ERROR for each.

A refusal (a connection past the cap, a frame or request refused) costs the server a little each time, and a client
that retries at once can repeat it hundreds of times a second: a 16 MiB frame takes ~16 ms of the server's CPU to
receive, a refused handshake a thread and an HTTP exchange. `RefusalPace` holds every refusal back for
OpenpiConfig.refusal_delay_s before it is sent (the connection's thread waits, using no CPU), so one connection costs
at most one refusal per delay; at most `limit` refusals wait at once, and one past that goes out at once.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.protocol import State
from websockets.sync.server import ServerConnection

# what a connection fails with when its peer goes away or stops answering: logged in one line, without traceback
PEER_FAILURES = (ConnectionClosed, ConnectionError, TimeoutError)


class ConnectionCap:
    """At most `limit` connections open at once (thread-safe). A connection counts from its admission in the
    handshake until `release` (its handler ended) or until its socket is closed (a handshake that failed after it
    was admitted: such connections are dropped from the count the next time one is admitted)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: set[ServerConnection] = set()
        self._lock = threading.Lock()

    def admit(self, conn: ServerConnection) -> bool:
        """Count `conn` as open, or False when `limit` are open."""
        with self._lock:
            self._open = {c for c in self._open if _alive(c)}  # at most `limit` of them
            if len(self._open) >= self.limit:
                return False
            self._open.add(conn)
            return True

    def release(self, conn: ServerConnection) -> None:
        with self._lock:
            self._open.discard(conn)

    @property
    def open(self) -> int:
        with self._lock:
            return len(self._open)


class RefusalPace:
    """Holds each refusal back for `delay_s` (see the module docstring); `stop()` lets every waiting one go."""

    def __init__(self, delay_s: float, limit: int) -> None:
        self.delay_s = delay_s
        self._slots = threading.BoundedSemaphore(limit)
        self._stopping = threading.Event()

    def wait(self) -> None:
        """Return after `delay_s`, at once when `limit` refusals already wait or once stopped."""
        if self.delay_s <= 0 or not self._slots.acquire(blocking=False):
            return
        try:
            self._stopping.wait(self.delay_s)
        finally:
            self._slots.release()

    def stop(self) -> None:
        self._stopping.set()


def _alive(conn: ServerConnection) -> bool:
    return conn.protocol.state is not State.CLOSED and conn.socket.fileno() >= 0


class ConnectionLog(logging.LoggerAdapter):
    """websockets' logger for the endpoint (`serve(logger=...)`): a record with a traceback of a connection whose
    peer went away (PEER_FAILURES: a keepalive ping unanswered, a close not acknowledged, a reset) becomes one line
    at WARNING naming the exception; every other record passes on as websockets logs it."""

    def log(self, level: int, msg: Any, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        exc = _exception(exc_info)
        if isinstance(exc, PEER_FAILURES):
            text = str(msg) % args if args else str(msg)
            detail = " ".join(str(exc).split()) or "no detail"
            super().log(logging.WARNING, "openpi connection: %s: %s: %s", text, type(exc).__name__, detail, **kwargs)
            return
        super().log(level, msg, *args, exc_info=exc_info, **kwargs)


def _exception(exc_info: Any) -> BaseException | None:
    """The exception a logging call's `exc_info` names (True: the one being handled)."""
    if exc_info is True:
        return sys.exc_info()[1]
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1]
    return None
