"""The queue's fair shares (vlash.server.shares through JobQueue): a flood of in-process (openpi websocket) clients
leaves a ZeroMQ robot its place and its turn, a client refused BUSY keeps a claim to the next place, batches take the
transports in turn. A deterministic simulation on a simulated clock (one time step: one batch of the model), direct
JobQueue calls; no wall clock, no threads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

import numpy as np

from robot_io.protocol import Infer
from vlash.server.jobs import ACTIVE_CLIENT_S, BUSY, Job, JobQueue
from vlash.server.shares import IN_PROCESS, ZEROMQ

BATCH_NS = 50_000_000  # one batch of the model on the simulated clock: 50 ms
MAX_PENDING, MAX_BATCH = 64, 8  # the server's defaults (ServerConfig)
ROBOT = b"robot"


def _sink(reply) -> None:
    """An in-process client's replies (not looked at here)."""


@dataclass
class Sim:
    """A JobQueue on a simulated clock and the requests sent to it."""

    max_pending: int = MAX_PENDING
    now_ns: int = 0
    ids: count = field(default_factory=lambda: count(1))

    def __post_init__(self) -> None:
        self.queue = JobQueue(1, self.max_pending, clock=lambda: self.now_ns)

    def send(self, client: bytes, local: Callable | None) -> Job | None:
        """`client` sends a request now: its job, or None when it was refused BUSY."""
        infer = Infer(next(self.ids), 0, 0, "", {}, np.zeros(1, np.float32))
        job = Job(client, infer, local, received_ns=self.now_ns)
        refused = self.queue.submit(job)
        if refused and refused[0] is job:
            assert job.reason == BUSY
            return None
        return job


@dataclass
class RobotLog:
    chunks: int = 0
    busy: int = 0
    latency_batches: list[int] = field(default_factory=list)  # first send of a chunk's request -> its chunk

    @property
    def p50(self) -> float:
        return float(np.median(self.latency_batches))


def flood_run(flood: int, flood_local: bool, batches: int = 400, think: int = 2) -> RobotLog:
    """`flood` clients (in process, or on ZeroMQ) that send a request whenever none of theirs is queued (a refused one
    at once again, every batch), and one ZeroMQ robot that asks for its next chunk `think` batches after the last
    one came (after BUSY: again at the next batch). The flood sends before the robot at every step."""
    sim = Sim()
    local = _sink if flood_local else None
    idle = [f"flood-{i}".encode() for i in range(flood)]  # flood clients with no request queued
    log, robot_job, robot_due, first_sent = RobotLog(), None, 0, None
    for step in range(batches):
        idle = [client for client in idle if sim.send(client, local) is None]
        if robot_job is None and step >= robot_due:
            first_sent = step if first_sent is None else first_sent
            robot_job = sim.send(ROBOT, None)
            if robot_job is None:
                log.busy += 1
                robot_due = step + 1
        batch = sim.queue.take_batch(MAX_BATCH, 0.0)
        sim.now_ns += BATCH_NS
        for job in batch:
            sim.queue.done(job)
            if job.client != ROBOT:
                idle.append(job.client)
                continue
            log.chunks += 1
            log.latency_batches.append(step + 1 - first_sent)
            robot_job, robot_due, first_sent = None, step + 1 + think, None
    return log


def test_a_flood_of_websocket_clients_leaves_a_zeromq_robot_its_chunks_at_its_idle_latency():
    """Issue 42: 100 openpi clients kept the 64 places full and a ZeroMQ robot got BUSY 249 times and 3 chunks.
    Its target: >= 90% of its chunks at p50 <= 2x its idle p50 (here in batches; the measured one is a benchmark)."""
    alone = flood_run(0, flood_local=True)
    flooded = flood_run(100, flood_local=True)
    assert alone.busy == 0 and alone.p50 == 1
    assert flooded.chunks >= 0.9 * alone.chunks, (flooded, alone.chunks)
    assert flooded.p50 <= 2 * alone.p50 and max(flooded.latency_batches) <= 2, flooded.latency_batches
    assert flooded.busy <= 1  # once, on arrival, when the flood held every place


def test_a_robot_refused_in_a_flood_of_its_own_transport_keeps_its_turn():
    """One transport: 100 ZeroMQ clients flooding, the robot one client among 101. A refused robot's claim is served
    before the newcomers that came after it, so each of its requests waits one pass of the line at most (every client
    served once) and it gets a fair share of the chunks; the flood, sending first at every step, never starves it."""
    flooded = flood_run(100, flood_local=False)
    one_pass = -(-(100 + 1) // MAX_BATCH) + 1  # batches that serve every client once, and the robot's own
    assert max(flooded.latency_batches) <= one_pass, flooded.latency_batches
    assert flooded.chunks >= 400 // (one_pass + 2), flooded  # a chunk per pass and the robot's think time


def test_a_client_refused_busy_has_the_next_place_and_the_turn_of_its_first_refusal():
    sim = Sim(max_pending=2)
    a, b = sim.send(b"a", None), sim.send(b"b", None)
    sim.now_ns += 1
    assert sim.send(b"c", None) is None  # full: c holds a claim from now on
    claimed_ns = sim.now_ns
    assert sim.queue.take_batch(1, 0.0) == [a]  # a place frees
    sim.now_ns += 1
    assert sim.send(b"d", None) is None  # a newcomer does not take the place claimed by c
    sim.now_ns += 1
    c = sim.send(b"c", None)
    assert c is not None and c.turn_ns == claimed_ns  # c's turn: its first refusal, not this request
    assert sim.queue.take_batch(2, 0.0) == [b, c]
    assert sim.send(b"d", None) is not None  # c's claim ended with its place: d's (older than e's) comes next


def test_claims_end_on_reset_and_when_their_client_goes_quiet():
    sim = Sim(max_pending=1)
    sim.send(b"a", None)
    assert sim.send(b"b", None) is None and sim.send(b"c", None) is None  # b's claim, then c's
    sim.queue.reset(b"b")  # b left: its claim goes
    sim.queue.take_batch(1, 0.0)
    sim.now_ns += int(2 * ACTIVE_CLIENT_S * 1e9)  # c gave up long ago: its claim is forgotten
    assert sim.send(b"newcomer", None) is not None
    assert list(sim.queue.shares.heard) == [b"newcomer"] and sim.queue.shares._claims == {}


def test_a_zeromq_robot_gets_its_place_while_websocket_clients_hold_every_other_one():
    sim = Sim()
    websocket = [sim.send(f"ws-{i}".encode(), _sink) for i in range(MAX_PENDING)]
    assert all(websocket)  # one transport active: every place is its to take
    assert sim.send(ROBOT, None) is None  # the robot arrives: all places taken; one is owed to it from now on
    sim.queue.take_batch(1, 0.0)
    assert sim.send(b"ws-new", _sink) is None  # the freed place is the robot's
    robot = sim.send(ROBOT, None)
    assert robot is not None and sim.queue.take_batch(1, 0.0) == [robot]  # served next, before 63 waiting
    sim.queue.done(robot)
    assert sim.send(b"ws-new", _sink) is None  # while the robot is active its place stays free for it
    assert sim.send(ROBOT, None) is not None


def test_batches_take_the_transports_in_turn():
    sim = Sim()
    jobs = [sim.send(f"ws-{i}".encode(), _sink) for i in range(3)]
    sim.now_ns += 1
    robots = [sim.send(f"robot-{i}".encode(), None) for i in range(2)]
    taken = [sim.queue.take_batch(1, 0.0)[0] for _ in range(5)]
    assert [job.transport for job in taken] == [IN_PROCESS, ZEROMQ, IN_PROCESS, ZEROMQ, IN_PROCESS]
    assert taken == [jobs[0], robots[0], jobs[1], robots[1], jobs[2]]  # oldest turn first within a transport


def test_with_one_place_the_transports_never_hold_it_back_for_each_other():
    """max_pending 1, two transports: no share to owe (1 // 2 = 0), so the one place goes to whoever asks while it is
    free, never held back for a transport that cannot have it (owing each other a place, neither would get it)."""
    sim = Sim(max_pending=1)
    websocket = sim.send(b"ws", _sink)
    assert sim.send(ROBOT, None) is None
    assert sim.queue.take_batch(1, 0.0) == [websocket]
    sim.queue.done(websocket)
    robot = sim.send(ROBOT, None)
    assert robot is not None and sim.queue.take_batch(1, 0.0) == [robot]
    sim.queue.done(robot)
    assert sim.send(b"ws", _sink) is not None


def test_while_a_robot_is_active_a_batch_of_the_flood_is_at_most_shared_max():
    """Issue 42's measured run: on a CPU a batch of 8 costs ~5x one request, so a robot that arrives while one runs
    waited for it; while another transport is active (heard from lately, not only ready), the batch is capped."""
    sim = Sim()
    robot = sim.send(ROBOT, None)
    assert sim.queue.take_batch(MAX_BATCH, 0.0, shared_max=2) == [robot]
    sim.queue.done(robot)  # the robot thinks: heard from, nothing ready
    flood = [sim.send(f"ws-{i}".encode(), _sink) for i in range(20)]
    assert sim.queue.take_batch(MAX_BATCH, 0.0, shared_max=2) == flood[:2]
    sim.now_ns += int(2 * ACTIVE_CLIENT_S * 1e9)  # the robot went quiet: the flood alone takes whole batches
    assert sim.queue.take_batch(MAX_BATCH, 0.0, shared_max=2) == flood[2:10]


def test_while_both_transports_have_jobs_ready_a_batch_takes_one_transports_only():
    sim = Sim()
    websocket = [sim.send(f"ws-{i}".encode(), _sink) for i in range(3)]
    sim.now_ns += 1
    robots = [sim.send(f"robot-{i}".encode(), None) for i in range(2)]
    assert sim.queue.take_batch(MAX_BATCH, 0.0, shared_max=MAX_BATCH) == websocket  # the oldest turn leads
    assert sim.queue.take_batch(MAX_BATCH, 0.0, shared_max=MAX_BATCH) == robots
