"""JobQueue: newest wins within a cancel budget, one turn per client; a fast client is served and costs the
others no more than a robot that always has a request waiting (deterministic simulation, no wall clock)."""

from __future__ import annotations

import numpy as np

from robot_io.protocol import Infer
from tests.server.job_simulation import SimClient, fast_client_scenario, simulate
from vlash.server.jobs import RESET, SUPERSEDED, Job, JobQueue


def job(client: bytes, request_id: int) -> Job:
    return Job(client, Infer(request_id, 0, 0, "", {}, np.zeros(1, np.float32)))


def test_a_newer_request_cancels_the_running_one_once_then_the_running_one_finishes():
    queue = JobQueue(max_consecutive_cancels=1)
    first = job(b"a", 1)
    queue.submit(first)
    assert queue.take(0.0) is first
    second = job(b"a", 2)
    queue.submit(second)  # newest wins: the running request is cancelled
    assert first.reason == SUPERSEDED
    queue.done(first)
    assert queue.take(0.0) is second
    third, fourth = job(b"a", 3), job(b"a", 4)
    assert queue.submit(third) == []  # budget spent: `second` runs on, `third` waits
    assert not second.cancelled.is_set()
    assert queue.submit(fourth) == [third]  # a pending request is still replaced (DROPPED)
    assert third.reason == SUPERSEDED and not second.cancelled.is_set()
    queue.done(second)  # ran to its end: the budget starts again
    assert queue.take(0.0) is fourth
    queue.submit(job(b"a", 5))
    assert fourth.reason == SUPERSEDED


def test_with_no_budget_a_running_request_is_never_cancelled_by_a_newer_one():
    queue = JobQueue(max_consecutive_cancels=0)
    first = job(b"a", 1)
    queue.submit(first)
    queue.take(0.0)
    queue.submit(job(b"a", 2))
    assert not first.cancelled.is_set() and len(queue) == 1


def test_reset_still_cancels_and_clears_the_budget():
    queue = JobQueue(max_consecutive_cancels=1)
    first = job(b"a", 1)
    queue.submit(first)
    queue.take(0.0)
    queue.submit(job(b"a", 2))  # cancels `first`: budget spent
    queue.done(first)
    second = queue.take(0.0)
    assert queue.reset(b"a") == 1 and second.reason == RESET
    queue.done(second)
    third = job(b"a", 3)
    queue.submit(third)
    queue.take(0.0)
    queue.submit(job(b"a", 4))
    assert third.reason == SUPERSEDED  # the budget started again after the reset


def test_a_replaced_pending_request_keeps_the_clients_turn():
    queue = JobQueue()
    queue.submit(job(b"a", 1))
    queue.submit(job(b"b", 1))
    queue.submit(job(b"a", 2))  # a updates its observation while it waits: still first in line
    assert [queue.take(0.0).client for _ in range(2)] == [b"a", b"b"]


def test_a_request_sent_while_its_clients_request_runs_queues_behind_those_already_waiting():
    queue = JobQueue(max_consecutive_cancels=0)
    running = job(b"fast", 1)
    queue.submit(running)
    queue.take(0.0)
    queue.submit(job(b"fast", 2))  # sent while its own request runs
    queue.submit(job(b"robot", 1))
    queue.done(running)
    assert queue.take(0.0).client == b"robot"


def test_the_cancel_count_is_forgotten_once_a_request_runs_to_its_end():
    queue = JobQueue(max_consecutive_cancels=1)
    for rid in range(1, 200):  # a client superseding itself forever leaves no per-client state behind
        queue.submit(job(b"a", rid))
        running = queue.take(0.0)
        queue.done(running)
    assert queue._cancels_in_a_row == {}


def test_a_fast_client_gets_chunks_and_costs_the_others_no_more_than_a_greedy_robot():
    """a, b: robots asking again 25 units after each chunk; the third client either sends every 3 units (an
    inference takes 10) or is a robot that asks again as soon as it has a chunk (the fair reference)."""
    for budget in (0, 1):
        fast = fast_client_scenario(JobQueue(budget), fast=True)
        greedy = simulate(
            JobQueue(budget), [SimClient("a", think=25), SimClient("b", think=25), SimClient("fast")], 10, fast.duration
        )
        assert fast.served["fast"] >= greedy.served["fast"] / (budget + 1) > 0, (budget, fast, greedy)
        cancelled_runs = fast.wasted_units / 10  # each cancelled run wasted less than one inference
        assert fast.throughput(["a", "b"]) >= greedy.throughput(["a", "b"]) - 1000 * cancelled_runs / fast.duration
        if budget == 0:  # no cancelled work at all: exactly a greedy robot
            assert fast.wasted_units == 0 and fast.throughput(["a", "b"]) == greedy.throughput(["a", "b"])


def test_a_fast_client_among_busy_robots_is_served_and_does_not_slow_them():
    """Saturated: robots asking again 2 units after each chunk; the fast client may not take more than a robot."""
    for budget in (0, 1, 2):
        fast = fast_client_scenario(JobQueue(budget), fast=True, think=2)
        robot = fast_client_scenario(JobQueue(budget), fast=False, think=2)
        assert fast.served["fast"] > 0 and fast.throughput(["a", "b"]) >= robot.throughput(["a", "b"]), budget
