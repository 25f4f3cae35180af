"""The server's request queue: one pending request per client, newest wins, oldest client first.

A client has at most one turn in line at a time: its place in the arrival order of pending requests. A newer
request replacing its pending one keeps that place (a client that updates its observation while it waits is not
sent to the back, or a client that sends faster than its turn comes would never be served); a request sent while
the same client's request runs joins the line when that one ends (no client holds a turn while it is served).

The socket thread submits and resets; the model thread takes jobs one at a time. A job that is already
running is not removed but cancelled (its `cancelled` event is set); the model thread notices between
denoise steps and stops.

Newest wins, within a budget: a newer request of the same client cancels its running one at most
`max_consecutive_cancels` times in a row. Past that the running request finishes (its chunk is sent) and the
newest waits its turn; the count starts again once one of the client's requests ran to its end. Without the
budget a client that sends faster than one inference never gets a chunk (each request cancels the previous one)
and the cancelled work is time the other clients wait for.
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

    def __init__(self, max_consecutive_cancels: int = 1) -> None:
        self._cond = threading.Condition()
        self._pending: dict[bytes, Job] = {}  # insertion order = arrival order
        self._running: Job | None = None
        self._closed = False
        self.max_consecutive_cancels = max_consecutive_cancels
        # client -> its running requests cancelled by a newer one since one last ran to its end (only clients
        # with a pending request: cleared when one finishes or on reset, so it never outgrows the queue)
        self._cancels_in_a_row: dict[bytes, int] = {}

    def submit(self, job: Job) -> list[Job]:
        """Queue `job`; returns the client's pending job it replaced (never started), if any. The client's
        running job, if any, is cancelled as SUPERSEDED (the model thread reports it) unless the client's cancel
        budget is spent (see the module docstring)."""
        with self._cond:
            if self._closed:
                job.cancel(SHUTDOWN)
                return [job]
            replaced = self._pending.get(job.client)  # replaced in place below: the client keeps its turn
            if replaced is not None:
                replaced.cancel(SUPERSEDED)
            running = self._running
            if running is not None and running.client == job.client and not running.cancelled.is_set():
                cancels = self._cancels_in_a_row.get(job.client, 0)
                if cancels < self.max_consecutive_cancels:
                    running.cancel(SUPERSEDED)
                    self._cancels_in_a_row[job.client] = cancels + 1
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
        """The model thread finished `job` (served, failed or cancelled)."""
        with self._cond:
            if self._running is job:
                self._running = None
            waiting = self._pending.pop(job.client, None)
            if waiting is not None:  # sent while this one ran: its turn starts now, behind those already waiting
                self._pending[job.client] = waiting
            if job.reason is None:  # ran to its end: the client's cancel budget starts again
                self._cancels_in_a_row.pop(job.client, None)

    def reset(self, client: bytes) -> int:
        """Forget `client`'s pending job and cancel its running one; returns how many were affected."""
        with self._cond:
            count = 0
            self._cancels_in_a_row.pop(client, None)
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
            self._cancels_in_a_row.clear()
            if self._running is not None:
                self._running.cancel(SHUTDOWN)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._pending)
