"""The server's request queue: one pending request per client, newest wins, oldest client first.

A client has at most one turn in line at a time: its place in the order of pending requests (`Job.turn_ns`: its
request's receipt, or its first refused one's, see Admission). A newer request replacing its pending one keeps that
place (a client that updates its observation while it waits is not sent to the back, or a client that sends faster
than its turn comes would never be served); a request sent while the same client's request runs joins the line when
that one ends (no client holds a turn while it is served).

The socket thread submits and resets; the model thread takes a batch of jobs at a time (`take_batch`: up to
max_jobs clients' pending jobs, oldest turn first; while several transports are active, one transport's per batch,
the transports in turn (vlash.server.shares); one job per client, so several may run at once). A job that is
already running is not removed but cancelled (its `cancelled` event is set); the model thread notices between
denoise steps and drops it from its batch.

Gathering waits only for clients that are expected to send: a client heard from (a request received) in the last
ACTIVE_CLIENT_S seconds that has no request pending. A robot alone on the server is never held back for a batch
that cannot come.

Admission: at most `max_pending` jobs wait, shared fairly between the transports (ZeroMQ, in process) and, through
claims, between the clients refused (vlash.server.shares: the shares, the claims and the order batches take jobs in).
A request of a client with no pending job and no place for it is refused (cancelled BUSY and handed back by
`submit`); a client replacing its own pending job is always accepted, since it does not grow the queue.

Newest wins, within a budget: a newer request of the same client cancels its running one at most
`max_consecutive_cancels` times in a row. Past that the running request finishes (its chunk is sent) and the
newest waits its turn; the count starts again once one of the client's requests ran to its end. Without the
budget a client that sends faster than one inference never gets a chunk (each request cancels the previous one)
and the cancelled work is time the other clients wait for.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from robot_io.protocol import Actions, Error, Infer
from vlash.server.shares import ACTIVE_CLIENT_S, IN_PROCESS, ZEROMQ, Shares

SUPERSEDED = "superseded"  # a newer request of the same client arrived
RESET = "reset"  # the client sent RESET
SHUTDOWN = "shutdown"  # the server is stopping
BUSY = "busy"  # refused on arrival: no place for it in the queue (vlash.server.shares)
__all__ = ["ACTIVE_CLIENT_S", "BUSY", "RESET", "SHUTDOWN", "SUPERSEDED", "Job", "JobQueue"]

# (t0_s, pending) -> seconds the model thread may still wait for more jobs before it takes a batch (<= 0: take it
# now); t0_s is the oldest pending job's receipt on the time.monotonic clock. See vlash.server.batching.
GatherRule = Callable[[float, int], float]


# how an in-process client (vlash.server.local_client) gets its replies: as message objects, never encoded
ReplySink = Callable[[Actions | Error], None]


@dataclass(eq=False)
class Job:
    """One INFER of one client, from receipt to its last reply: the request as admission passed it (the runtime runs
    it as it is), where its replies go, and its place in line. Who changes what: the queue, under its lock, sets
    `turn_ns` and cancels (`cancel`: `reason`, then the `cancelled` event, once); the model thread only reads them
    (`cancelled` between denoise steps, `reason` once it is set). What the model thread learns about the job while
    it runs is its own (vlash.server.worker), not kept here."""

    client: bytes  # ROUTER identity of the client (an in-process client's own id)
    infer: Infer  # the request, admitted (vlash.runtime.admission.admit); its replies carry its request_id, step_index
    local: ReplySink | None = None  # an in-process client's replies; None: on the ZeroMQ socket
    received_ns: int = field(default_factory=time.monotonic_ns)
    turn_ns: int = 0  # its place in line (JobQueue.submit sets it: its receipt, or its client's claim)
    cancelled: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None  # why it was cancelled (SUPERSEDED, RESET, SHUTDOWN; BUSY: refused on arrival)

    @property
    def transport(self) -> str:
        """Where its client is: ZEROMQ, or IN_PROCESS (replies to `local`): the queue shares places between them."""
        return ZEROMQ if self.local is None else IN_PROCESS

    def cancel(self, reason: str) -> None:
        """(The queue, under its lock.) The first reason stays; the event is set after it, so a reader that saw the
        event reads the reason."""
        if self.reason is None:
            self.reason = reason
        self.cancelled.set()


class JobQueue:
    """Thread-safe: at most one pending and one running job per client; `take_batch` hands out the
    longest-waiting ones, the transports in turn."""

    def __init__(
        self,
        max_consecutive_cancels: int = 1,
        max_pending: int | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        """`max_pending`: jobs allowed to wait (None: no bound); see the module docstring. `clock`: the clock of
        Job.received_ns (time.monotonic_ns; a simulated one in tests)."""
        self._cond = threading.Condition()
        self._pending: dict[bytes, Job] = {}  # client -> its pending job
        self._running: dict[bytes, Job] = {}  # client -> its running job
        self._closed = False
        self.max_consecutive_cancels = max_consecutive_cancels
        self.max_pending = max_pending
        self._clock = clock
        # client -> its running requests cancelled by a newer one since one last ran to its end (only clients
        # with a pending request: cleared when one finishes or on reset, so it never outgrows the queue)
        self._cancels_in_a_row: dict[bytes, int] = {}
        # the clients heard from in the last ACTIVE_CLIENT_S, the transports' shares of the places, the claims
        self.shares = Shares(max_pending)

    def submit(self, job: Job) -> list[Job]:
        """Queue `job`; returns the client's pending job it replaced (never started), if any, or `job` itself
        when it is refused (cancelled SHUTDOWN once closed, BUSY when there is no place for it). The client's running
        job, if any, is cancelled as SUPERSEDED (the model thread reports it) unless the client's cancel budget
        is spent (see the module docstring)."""
        with self._cond:
            if self._closed:
                job.cancel(SHUTDOWN)
                return [job]
            self.shares.hear(job.client, job.transport, job.received_ns, self._clock())
            replaced = self._pending.get(job.client)  # replaced in place below: the client keeps its turn
            if replaced is None and not self.shares.admits(job.client, job.transport, self._pending_per_transport()):
                self.shares.refused(job.client, job.transport, job.received_ns)
                job.cancel(BUSY)
                return [job]
            if replaced is not None:
                replaced.cancel(SUPERSEDED)
                job.turn_ns = replaced.turn_ns
            else:
                job.turn_ns = self.shares.admitted(job.client, job.received_ns)
            running = self._running.get(job.client)
            if running is not None and not running.cancelled.is_set():
                cancels = self._cancels_in_a_row.get(job.client, 0)
                if cancels < self.max_consecutive_cancels:
                    running.cancel(SUPERSEDED)
                    self._cancels_in_a_row[job.client] = cancels + 1
            self._pending[job.client] = job
            self._cond.notify()
            return [] if replaced is None else [replaced]

    def _pending_per_transport(self) -> Counter[str]:
        """Pending jobs per transport (lock held; at most max_pending of them)."""
        return Counter(job.transport for job in self._pending.values())

    def take(self, timeout_s: float) -> Job | None:
        """The oldest pending job (now running), or None after `timeout_s` or once closed."""
        batch = self.take_batch(1, timeout_s)
        return batch[0] if batch else None

    def take_batch(
        self, max_jobs: int, timeout_s: float, gather: GatherRule | None = None, shared_max: int | None = None
    ) -> list[Job]:
        """Up to `max_jobs` pending jobs of distinct clients, the transports in turn and oldest turn first within
        each (vlash.server.shares), now running; [] after `timeout_s` with none pending, or once closed. With
        `gather`, once a job is pending and fewer than `max_jobs` are, wait for more as long as
        `gather(t0_s, pending)` allows (see GatherRule) and another client is expected to send (see the module
        docstring). `shared_max`: the largest batch while several transports have jobs ready (None: `max_jobs`)."""
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
            self.shares.forget_quiet(self._clock())  # a transport whose clients went quiet is no longer active
            batch = self.shares.batch(self._ready(), max_jobs, max_jobs if shared_max is None else shared_max)
            for job in batch:
                del self._pending[job.client]
                self._running[job.client] = job
            return batch

    def _others_expected(self) -> bool:
        """A client heard from in the last ACTIVE_CLIENT_S has no request pending (lock held)."""
        self.shares.forget_quiet(self._clock())
        return any(client not in self._pending for client in self.shares.heard)

    def _ready(self) -> list[Job]:
        """Pending jobs whose client has none running (lock held)."""
        return [job for client, job in self._pending.items() if client not in self._running]

    def done(self, job: Job) -> None:
        """The model thread finished `job` (served, failed or cancelled)."""
        with self._cond:
            if self._running.get(job.client) is job:
                del self._running[job.client]
            waiting = self._pending.get(job.client)
            if waiting is not None:  # sent while this one ran: its turn starts now, behind those already waiting
                waiting.turn_ns = max(self._clock(), waiting.turn_ns)
            if job.reason is None:  # ran to its end: the client's cancel budget starts again
                self._cancels_in_a_row.pop(job.client, None)

    def reset(self, client: bytes) -> int:
        """Forget `client`'s pending job (and its claim to a place) and cancel its running one; returns how many jobs
        were affected."""
        with self._cond:
            count = 0
            self._cancels_in_a_row.pop(client, None)
            self.shares.drop_claim(client)
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
            self.shares.clear()
            for job in self._running.values():
                job.cancel(SHUTDOWN)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._pending)
