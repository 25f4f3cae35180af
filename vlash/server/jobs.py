"""The server's request queue: one pending request per client, newest wins, oldest client first.

A client has at most one turn in line at a time: its place in the arrival order of pending requests. A newer
request replacing its pending one keeps that place (a client that updates its observation while it waits is not
sent to the back, or a client that sends faster than its turn comes would never be served); a request sent while
the same client's request runs joins the line when that one ends (no client holds a turn while it is served).

The socket thread submits and resets; the model thread takes a batch of jobs at a time (`take_batch`: up to
max_jobs clients' pending jobs, oldest turn first; one job per client, so several may run at once). A job that
is already running is not removed but cancelled (its `cancelled` event is set); the model thread notices between
denoise steps and drops it from its batch.

Gathering waits only for clients that are expected to send: a client heard from (a request received) in the last
ACTIVE_CLIENT_S seconds that has no request pending. A robot alone on the server is never held back for a batch
that cannot come.

Admission: at most `max_pending` jobs wait. A request of a client with no pending job while that many wait is
refused (cancelled BUSY and handed back by `submit`); a client replacing its own pending job is always accepted,
since it does not grow the queue.

Newest wins, within a budget: a newer request of the same client cancels its running one at most
`max_consecutive_cancels` times in a row. Past that the running request finishes (its chunk is sent) and the
newest waits its turn; the count starts again once one of the client's requests ran to its end. Without the
budget a client that sends faster than one inference never gets a chunk (each request cancels the previous one)
and the cancelled work is time the other clients wait for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from robot_io.protocol import Actions, Error, Infer
from vlash.runtime.request import ChunkRequest

SUPERSEDED = "superseded"  # a newer request of the same client arrived
RESET = "reset"  # the client sent RESET
SHUTDOWN = "shutdown"  # the server is stopping
BUSY = "busy"  # refused on arrival: max_pending jobs were waiting
# A client that sent a request this recently is expected to send again (a robot asks for a chunk every few control
# steps, well under a second apart), so a batch may wait for it; others are not waited for.
ACTIVE_CLIENT_S = 2.0

# (t0_s, pending) -> seconds the model thread may still wait for more jobs before it takes a batch (<= 0: take it
# now); t0_s is the oldest pending job's receipt on the time.monotonic clock. See vlash.server.batching.
GatherRule = Callable[[float, int], float]


# how an in-process client (vlash.server.local_client) gets its replies: as message objects, never encoded
ReplySink = Callable[[Actions | Error], None]


@dataclass(eq=False)
class Job:
    """One INFER of one client, from receipt to its last reply: the runtime request made from it once, where it
    arrived, and what its batch learns about it on the model thread."""

    client: bytes  # ROUTER identity of the client (an in-process client's own id)
    request_id: int  # the INFER's: its replies carry it
    step_index: int  # the INFER's control step: its replies carry it
    request: ChunkRequest
    local: ReplySink | None = None  # an in-process client's replies; None: on the ZeroMQ socket
    received_ns: int = field(default_factory=time.monotonic_ns)
    cancelled: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None  # why it was cancelled (SUPERSEDED, RESET, SHUTDOWN)
    # on the model thread, in its batch
    queue_ms: float = 0.0  # receipt -> batch start
    needed: int = 0  # leading rows of the chunk it asks for (PolicyRuntime.rows_needed)
    failure: Exception | None = None  # why it cannot go on (its rows do not fit, a partial ACTIONS refused): dropped
    answered: bool = False  # its last reply went out
    injected_ms: float = 0.0  # emulated device time spent while it ran (--inject-latency)

    @classmethod
    def of(cls, client: bytes, infer: Infer, local: ReplySink | None = None, received_ns: int | None = None) -> Job:
        """The job of `infer` (already validated): its request made here, once."""
        received = time.monotonic_ns() if received_ns is None else received_ns
        return cls(client, infer.request_id, infer.step_index, ChunkRequest.from_infer(infer), local, received)

    def cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.cancelled.set()

    @property
    def live(self) -> bool:
        """Still running in its batch: not answered, not failed, not cancelled."""
        return not self.answered and self.failure is None and not self.cancelled.is_set()


class JobQueue:
    """Thread-safe: at most one pending and one running job per client; `take_batch` hands out the
    longest-waiting ones."""

    def __init__(self, max_consecutive_cancels: int = 1, max_pending: int | None = None) -> None:
        """`max_pending`: jobs allowed to wait (None: no bound); see the module docstring."""
        self._cond = threading.Condition()
        self._pending: dict[bytes, Job] = {}  # insertion order = arrival order
        self._running: dict[bytes, Job] = {}  # client -> its running job
        self._closed = False
        self.max_consecutive_cancels = max_consecutive_cancels
        self.max_pending = max_pending
        # client -> its running requests cancelled by a newer one since one last ran to its end (only clients
        # with a pending request: cleared when one finishes or on reset, so it never outgrows the queue)
        self._cancels_in_a_row: dict[bytes, int] = {}
        # client -> receipt of its latest request, oldest first; only clients heard from in the last ACTIVE_CLIENT_S
        # (pruned on every submit, so it never outgrows the clients sending now)
        self._heard_ns: dict[bytes, int] = {}

    def submit(self, job: Job) -> list[Job]:
        """Queue `job`; returns the client's pending job it replaced (never started), if any, or `job` itself
        when it is refused (cancelled SHUTDOWN once closed, BUSY when the queue is full). The client's running
        job, if any, is cancelled as SUPERSEDED (the model thread reports it) unless the client's cancel budget
        is spent (see the module docstring)."""
        with self._cond:
            replaced = self._pending.get(job.client)  # replaced in place below: the client keeps its turn
            if self._closed or (
                replaced is None and self.max_pending is not None and len(self._pending) >= self.max_pending
            ):
                job.cancel(SHUTDOWN if self._closed else BUSY)
                return [job]
            if replaced is not None:
                replaced.cancel(SUPERSEDED)
            self._heard_ns.pop(job.client, None)
            self._heard_ns[job.client] = job.received_ns
            self._forget_quiet_clients()
            running = self._running.get(job.client)
            if running is not None and not running.cancelled.is_set():
                cancels = self._cancels_in_a_row.get(job.client, 0)
                if cancels < self.max_consecutive_cancels:
                    running.cancel(SUPERSEDED)
                    self._cancels_in_a_row[job.client] = cancels + 1
            self._pending[job.client] = job
            self._cond.notify()
            return [] if replaced is None else [replaced]

    def take(self, timeout_s: float) -> Job | None:
        """The oldest pending job (now running), or None after `timeout_s` or once closed."""
        batch = self.take_batch(1, timeout_s)
        return batch[0] if batch else None

    def take_batch(self, max_jobs: int, timeout_s: float, gather: GatherRule | None = None) -> list[Job]:
        """Up to `max_jobs` pending jobs of distinct clients, oldest turn first (now running); [] after
        `timeout_s` with none pending, or once closed. With `gather`, once a job is pending and fewer than
        `max_jobs` are, wait for more as long as `gather(t0_s, pending)` allows (see GatherRule) and another
        client is expected to send (see the module docstring)."""
        with self._cond:
            if not self._ready() and not self._closed:
                self._cond.wait(timeout_s)
            while gather is not None and not self._closed and 0 < len(ready := self._ready()) < max_jobs:
                if not self._others_expected():
                    break
                wait_s = gather(min(job.received_ns for job in ready) / 1e9, len(ready))
                if wait_s <= 0:
                    break
                self._cond.wait(wait_s)  # a submit wakes it: the rule is asked again with one more pending
            if self._closed:
                return []
            batch = self._ready()[:max_jobs]
            for job in batch:
                del self._pending[job.client]
                self._running[job.client] = job
            return batch

    def _others_expected(self) -> bool:
        """A client heard from in the last ACTIVE_CLIENT_S has no request pending (lock held)."""
        self._forget_quiet_clients()
        return any(client not in self._pending for client in self._heard_ns)

    def _forget_quiet_clients(self) -> None:
        """Drop the clients not heard from in the last ACTIVE_CLIENT_S (lock held): oldest first, so each entry is
        looked at once more than it is dropped, and the map holds only the clients heard from that recently."""
        oldest_kept = time.monotonic_ns() - int(ACTIVE_CLIENT_S * 1e9)
        while self._heard_ns:
            client, heard_ns = next(iter(self._heard_ns.items()))
            if heard_ns >= oldest_kept:
                return
            del self._heard_ns[client]

    def _ready(self) -> list[Job]:
        """Pending jobs whose client has none running, in turn order (lock held)."""
        return [job for client, job in self._pending.items() if client not in self._running]

    def done(self, job: Job) -> None:
        """The model thread finished `job` (served, failed or cancelled)."""
        with self._cond:
            if self._running.get(job.client) is job:
                del self._running[job.client]
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
            running = self._running.get(client)
            if running is not None:
                running.cancel(RESET)
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
            for job in self._running.values():
                job.cancel(SHUTDOWN)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._pending)
