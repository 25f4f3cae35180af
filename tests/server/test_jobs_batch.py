"""JobQueue.take_batch: several clients' jobs run at once, newest wins, the cancel budget, reset and close hold for
each of them; the gathering rule is asked as pending jobs arrive; a full queue refuses new clients (BUSY)."""

from __future__ import annotations

import threading
import time

import numpy as np

from robot_io.protocol import Infer
from vlash.server.jobs import ACTIVE_CLIENT_S, BUSY, RESET, SHUTDOWN, SUPERSEDED, Job, JobQueue

GATHER_S = 5.0  # what a gathering rule below allows at most: a wait that must be cut short fails in this long


def job(client: bytes, request_id: int, received_ns: int | None = None) -> Job:
    infer = Infer(request_id, 0, 0, "", {}, np.zeros(1, np.float32))
    return Job(client, infer) if received_ns is None else Job(client, infer, received_ns=received_ns)


def wait_until(deadline_s: float) -> float:
    """What a gathering rule returns to wait until `deadline_s` (time.monotonic) and no longer."""
    return deadline_s - time.monotonic()


def test_a_batch_takes_distinct_clients_oldest_turn_first_up_to_max_jobs():
    queue = JobQueue()
    a1, b1, c1 = job(b"a", 1), job(b"b", 1), job(b"c", 1)
    for j in (a1, b1, c1):
        queue.submit(j)
    a2 = job(b"a", 2)
    queue.submit(a2)  # replaces a1 and keeps a's turn
    assert queue.take_batch(2, 0.0) == [a2, b1] and len(queue) == 1
    assert queue.take_batch(2, 0.0) == [c1]
    assert queue.take_batch(2, 0.0) == []


def test_newest_wins_and_the_cancel_budget_hold_for_every_running_job():
    queue = JobQueue(max_consecutive_cancels=1)
    a1, b1 = job(b"a", 1), job(b"b", 1)
    queue.submit(a1)
    queue.submit(b1)
    assert queue.take_batch(4, 0.0) == [a1, b1]
    a2, b2 = job(b"a", 2), job(b"b", 2)
    queue.submit(a2)  # cancels a's running job; b's runs on
    assert a1.reason == SUPERSEDED and not b1.cancelled.is_set()
    queue.submit(b2)
    assert b1.reason == SUPERSEDED
    assert queue.take_batch(4, 0.0) == []  # a2, b2 wait until their clients' running jobs are done
    queue.done(a1)
    queue.done(b1)
    assert queue.take_batch(4, 0.0) == [a2, b2]
    a3 = job(b"a", 3)
    assert queue.submit(a3) == [] and not a2.cancelled.is_set()  # a's budget is spent: a2 runs on
    queue.done(a2)
    queue.done(b2)
    assert queue.take_batch(4, 0.0) == [a3]
    queue.submit(job(b"a", 4))
    assert a3.reason == SUPERSEDED  # a2 ran to its end: the budget started again


def test_reset_and_close_cancel_each_running_job():
    queue = JobQueue()
    jobs = [job(name, 1) for name in (b"a", b"b", b"c")]
    for j in jobs:
        queue.submit(j)
    running = queue.take_batch(3, 0.0)
    assert queue.reset(b"b") == 1 and running[1].reason == RESET
    assert not running[0].cancelled.is_set() and not running[2].cancelled.is_set()
    waiting = job(b"d", 1)
    queue.submit(waiting)
    queue.close()
    assert [j.reason for j in running] == [SHUTDOWN, RESET, SHUTDOWN] and waiting.reason == SHUTDOWN
    assert queue.take_batch(3, 0.0) == []


def test_a_full_queue_refuses_a_new_client_and_accepts_a_replacement():
    queue = JobQueue(max_pending=2)
    queue.submit(job(b"a", 1))
    queue.submit(job(b"b", 1))
    late = job(b"c", 1)
    assert queue.submit(late) == [late] and late.reason == BUSY and len(queue) == 2
    b2 = job(b"b", 2)
    assert [j.infer.request_id for j in queue.submit(b2)] == [1]  # replaces b's pending job: accepted
    running = queue.take_batch(1, 0.0)
    assert [j.client for j in running] == [b"a"]
    c2 = job(b"c", 2)
    assert queue.submit(c2) == [] and not c2.cancelled.is_set()  # one place free again
    a2 = job(b"a", 2)  # a client with a running job but none pending: refused while the queue is full
    assert queue.submit(a2) == [a2] and a2.reason == BUSY and not running[0].cancelled.is_set()


def heard_from(queue: JobQueue, client: bytes) -> None:
    """`client` sent a request that was served: it is expected to send again (ACTIVE_CLIENT_S)."""
    queue.submit(job(client, 0))
    (served,) = queue.take_batch(1, 0.0)
    queue.done(served)


def test_the_gathering_rule_is_asked_with_the_oldest_receipt_and_the_pending_count():
    queue = JobQueue()
    heard_from(queue, b"x")
    first, second = job(b"a", 1), job(b"b", 1)
    queue.submit(first)
    queue.submit(second)
    asked = []

    def take_now(t0_s: float, pending: int) -> float:
        asked.append((t0_s, pending))
        return 0.0

    assert queue.take_batch(4, 0.0, take_now) == [first, second]
    assert asked == [(first.received_ns / 1e9, 2)]
    queue.submit(job(b"c", 1))
    queue.submit(job(b"d", 1))
    assert len(queue.take_batch(2, 0.0, take_now)) == 2 and len(asked) == 1  # a full batch: not asked


def test_a_gathering_wait_ends_when_a_request_arrives_and_fills_the_batch():
    queue = JobQueue()
    heard_from(queue, b"b")
    queue.submit(job(b"a", 1))
    arrivals = []

    start = time.monotonic()

    def wait_long(t0_s: float, pending: int) -> float:
        if not arrivals:  # the other client sends while the model thread waits (it waits with the lock released)
            arrivals.append(threading.Thread(target=queue.submit, args=(job(b"b", 1),)))
            arrivals[0].start()
        return wait_until(start + GATHER_S)

    batch = queue.take_batch(2, 0.0, wait_long)
    arrivals[0].join()
    assert [j.client for j in batch] == [b"a", b"b"]
    assert time.monotonic() - start < GATHER_S  # woken by the arrival, not by the wait running out


def test_a_gathering_wait_ends_on_close():
    queue = JobQueue()
    heard_from(queue, b"b")
    queue.submit(job(b"a", 1))
    closer = []

    start = time.monotonic()

    def wait_long(t0_s: float, pending: int) -> float:
        if not closer:
            closer.append(threading.Thread(target=queue.close))
            closer[0].start()
        return wait_until(start + GATHER_S)

    assert queue.take_batch(2, 0.0, wait_long) == []
    closer[0].join()
    assert time.monotonic() - start < GATHER_S  # woken by close, not by the wait running out


def test_no_wait_for_a_batch_when_no_other_client_is_expected():
    queue = JobQueue()
    asked = []
    start = time.monotonic()

    def wait_long(t0_s: float, pending: int) -> float:
        asked.append(pending)
        return wait_until(start + GATHER_S)

    alone = job(b"a", 1)
    queue.submit(alone)
    assert queue.take_batch(4, 0.0, wait_long) == [alone] and asked == []  # nobody else was ever heard from
    queue.done(alone)
    heard_from(queue, b"b")
    pending = [job(b"a", 2), job(b"b", 2)]
    for j in pending:
        queue.submit(j)
    assert queue.take_batch(4, 0.0, wait_long) == pending and asked == []  # every client heard from is pending


def test_clients_no_longer_sending_are_forgotten_without_any_gathering():
    queue = JobQueue()
    long_ago = time.monotonic_ns() - int(2 * ACTIVE_CLIENT_S * 1e9)
    for i in range(1000):  # one request at a time, never gathered: only submit can forget them
        queue.submit(job(f"robot-{i}".encode(), 1, received_ns=long_ago))
        (taken,) = queue.take_batch(1, 0.0)
        queue.done(taken)
    queue.submit(job(b"now", 1))
    assert list(queue.shares.heard) == [b"now"]
