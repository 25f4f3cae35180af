"""The server's request queue: one pending request per client, newest wins, oldest client first.

The socket thread submits and resets; the model thread takes jobs one at a time. A job that is already
running is not removed but cancelled (its `cancelled` event is set); the model thread notices between
denoise steps and stops.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from robot_io.protocol import Infer

SUPERSEDED = "superseded"  # a newer request of the same client arrived
RESET = "reset"  # the client sent RESET
SHUTDOWN = "shutdown"  # the server is stopping


@dataclass(eq=False)
class Job:
    """One INFER request of one client, from receipt to its last reply."""

    client: bytes  # ROUTER identity of the client
    infer: Infer
    received_ns: int = field(default_factory=time.monotonic_ns)
    cancelled: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None  # why it was cancelled (SUPERSEDED, RESET, SHUTDOWN)

    def cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.cancelled.set()


class JobQueue:
    """Thread-safe: at most one pending job per client; `take` hands out the longest-waiting one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: dict[bytes, Job] = {}  # insertion order = arrival order
        self._running: Job | None = None
        self._closed = False

    def submit(self, job: Job) -> list[Job]:
        """Queue `job`; returns the client's pending job it replaced (never started), if any. The client's
        running job, if any, is cancelled as SUPERSEDED (the model thread reports it)."""
        with self._cond:
            if self._closed:
                job.cancel(SHUTDOWN)
                return [job]
            replaced = self._pending.pop(job.client, None)
            if replaced is not None:
                replaced.cancel(SUPERSEDED)
            if self._running is not None and self._running.client == job.client:
                self._running.cancel(SUPERSEDED)
            self._pending[job.client] = job
            self._cond.notify()
            return [] if replaced is None else [replaced]

    def take(self, timeout_s: float) -> Job | None:
        """The oldest pending job (now running), or None after `timeout_s` or once closed."""
        with self._cond:
            if not self._pending and not self._closed:
                self._cond.wait(timeout_s)
            if self._closed or not self._pending:
                return None
            client = next(iter(self._pending))
            self._running = self._pending.pop(client)
            return self._running

    def done(self, job: Job) -> None:
        with self._cond:
            if self._running is job:
                self._running = None

    def reset(self, client: bytes) -> int:
        """Forget `client`'s pending job and cancel its running one; returns how many were affected."""
        with self._cond:
            count = 0
            if self._pending.pop(client, None) is not None:
                count += 1
            if self._running is not None and self._running.client == client:
                self._running.cancel(RESET)
                count += 1
            return count

    def close(self) -> None:
        """Cancel everything and wake the model thread; later submits are refused."""
        with self._cond:
            self._closed = True
            for job in self._pending.values():
                job.cancel(SHUTDOWN)
            self._pending.clear()
            if self._running is not None:
                self._running.cancel(SHUTDOWN)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._pending)
