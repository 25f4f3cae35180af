"""The control loop never waits on the network: while the server is down, ticks keep their deadlines (the
client reconnects without blocking), and once a server is back on the same endpoint new chunks arrive."""

from __future__ import annotations

import time

import numpy as np

from robot_io.client import PolicyClient
from robot_io.control import ControlLoop, Tick
from robot_io.executors import ExecutorConfig, make_executor
from robot_io.protocol import CameraSpec, Infer, Metadata
from tests.fakes import LoopbackPolicyServer

H, J, RATE = 20, 2, 30.0
META = Metadata("hold", [CameraSpec("cam", 8, 8)], J, J, H, RATE, "fp32", "loopback", 1, "constant", False)


def plan(infer: Infer) -> np.ndarray:
    start = infer.state if infer.future_state is None else infer.future_state
    return np.tile(start, (H, 1))


class TimedTicks:
    """Ticks the executor with a constant observation and records each tick's duration."""

    def __init__(self, executor) -> None:
        self.executor, self.durations_ms = executor, []
        self.observation = {"state": np.zeros(J, np.float32), "images": {"cam": np.zeros((8, 8, 3), np.uint8)}}

    def __call__(self, tick: Tick) -> None:
        start = time.perf_counter()
        self.executor.tick(tick.index, self.observation, tick.start_ns)
        self.durations_ms.append((time.perf_counter() - start) * 1e3)


def test_ticks_keep_their_deadline_while_the_server_is_down_and_resume_when_it_returns():
    first = LoopbackPolicyServer("tcp://127.0.0.1:*", plan, META)
    endpoint = first.endpoint
    client = PolicyClient(endpoint, timeout_s=0.2)
    config = ExecutorConfig("vlash", execution_horizon=5, initial_delay=2, request_timeout_s=0.3, retry_after_s=0.05)
    loop = ControlLoop(RATE)
    executor = make_executor(client, config, loop.period_s)
    try:
        with first:
            executor.start()
            ticks = TimedTicks(executor)
            loop.run(ticks, max_ticks=15, idle=executor.receive)
            assert executor.counts.chunks >= 2
        down = TimedTicks(executor)  # the server is gone: requests go nowhere, the client times out and reconnects
        loop.run(down, duration_s=1.2, idle=executor.receive)
        assert client.counters["resets"] >= 2 and executor.counts.link_errors >= 2
        assert executor.counts.requests >= 6  # it kept asking (after each back-off)
        # a blocking re-handshake would hold a tick for the client's whole 0.2 s timeout, once per reconnect (at
        # least 2). Ticks take well under a millisecond; one slow tick is allowed for a loaded 2-core machine
        # descheduling the process inside a tick (CI has stalled it for 0.5 s)
        slow = [d for d in down.durations_ms if d >= 0.5 * client.timeout_s * 1e3]
        assert len(slow) <= 1 < client.counters["resets"], sorted(down.durations_ms)[-5:]
        assert np.median(down.durations_ms) < 1e3 / RATE / 2
        chunks_before = executor.counts.chunks
        with LoopbackPolicyServer(endpoint, plan, META) as second:
            loop.run(TimedTicks(executor), duration_s=1.0, idle=executor.receive)
            assert second.served >= 1
        assert executor.counts.chunks > chunks_before  # resumed without intervention
        assert client.counters["handshakes"] >= 2  # the METADATA of the re-handshake was taken by poll
    finally:
        client.close()


def test_first_submit_sends_hello_and_request_back_to_back_without_waiting():
    received = []

    def remember(infer: Infer) -> np.ndarray:
        received.append(infer.request_id)
        return plan(infer)

    with (
        LoopbackPolicyServer("tcp://127.0.0.1:*", remember, META) as server,
        PolicyClient(server.endpoint, 2.0) as client,
    ):
        obs = np.zeros(J, np.float32)
        infer = Infer(1, 0, time.time_ns(), "", {"cam": np.zeros((8, 8, 3), np.uint8)}, obs)
        client.submit(infer)  # never handshaken: HELLO and the request go out, METADATA is not waited for
        assert client.counters["sent"] == 1 and client.counters["handshakes"] == 0
        deadline = time.monotonic() + 5.0
        reply = None
        while reply is None and time.monotonic() < deadline:
            reply = client.poll(0.05)
        assert reply is not None and reply.request_id == 1 and reply.final
        assert client.metadata == META and client.counters["handshakes"] == 1 and client.counters["stale"] == 0
    assert received == [1]
