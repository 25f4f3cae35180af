"""The policy server killed mid-episode and restarted on the same endpoint, over real ZeroMQ in real time: the
robot holds at once without its loop waiting for the dead server, then resumes by itself once the server is back.
Paced by the chunk latency measured before the run (pacing.py), so a loaded machine runs the same scenario."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from robot_io.client import PolicyClient
from robot_io.runner import Runner
from tests.e2e.conftest import SLOW_SERVER_MS, serve, sim_robot
from tests.e2e.pacing import paced_run_config, probe_pace

OUTAGE_STEPS = 600  # the run's bound in control steps (20 s at 30 Hz); it stops 3 chunks after the restart
REPLY_TIMEOUT_CHUNKS = 4  # the client drops a silent connection after this many chunk latencies (~0.3 s idle)
REQUEST_TIMEOUT_CHUNKS = 6  # the executor abandons a request after this many (~0.5 s idle): after the client
RETRY_CHUNKS = 1  # back-off after a link failure (~0.1 s idle)


class Outage:
    """Kills the server once the robot runs chunks, restarts it on the same endpoint once the robot holds, and
    stops the run once chunks flow again. Driven by the runner's status callback (loop thread) and a thread;
    each wait is bounded by the run's own length."""

    def __init__(self, runtime, server, runner_box: list, wait_s: float, inject_latency_ms: float) -> None:
        self.runtime, self.server, self.runner_box = runtime, server, runner_box
        self.wait_s, self.inject_latency_ms = wait_s, inject_latency_ms
        self.status: dict = {}
        self.running, self.holding = threading.Event(), threading.Event()
        self.killed_step = self.restarted_step = None
        self.chunks_at_restart = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True)

    def on_status(self, status: dict) -> None:  # in the control loop: cheap, never blocks
        self.status = status
        if status["chunks"] >= 2:
            self.running.set()
        if self.killed_step is not None and status["holds"] > self.holds_at_kill + 3:
            self.holding.set()
        if self.chunks_at_restart is not None and status["chunks"] >= self.chunks_at_restart + 3:
            self.runner_box[0].loop.stop()

    def _main(self) -> None:
        try:
            assert self.running.wait(self.wait_s), "no chunks before the outage"
            endpoint = self.server.endpoint
            self.holds_at_kill = self.status["holds"]
            self.server.stop()
            self.killed_step = self.status["step"]
            assert self.holding.wait(self.wait_s), "the robot never held during the outage"
            self.server = serve(self.runtime, bind=endpoint, inject_latency_ms=self.inject_latency_ms)
            self.restarted_step = self.status["step"]
            self.chunks_at_restart = self.status["chunks"]
        except BaseException as exc:  # reported by the test
            self.error = exc


@pytest.mark.parametrize("slow_ms", [0.0, pytest.param(SLOW_SERVER_MS, marks=pytest.mark.slow, id="slow-server")])
def test_server_killed_mid_episode_robot_holds_then_resumes_after_restart(runtime, slow_ms):
    server = serve(runtime, inject_latency_ms=slow_ms)
    endpoint, camera = server.endpoint, server.metadata.cameras[0].name
    box: list = []
    robot = sim_robot(camera, max_steps=10_000, endless=True)  # one episode: no reset during the outage
    client = outage = None
    try:
        pace = probe_pace(server)
        timeouts = dict(
            request_timeout_s=pace.seconds(REQUEST_TIMEOUT_CHUNKS), retry_after_s=pace.seconds(RETRY_CHUNKS)
        )
        config = paced_run_config("vlash", pace, OUTAGE_STEPS, **timeouts)
        outage = Outage(runtime, server, box, config.duration_s, slow_ms)
        client = PolicyClient(endpoint, timeout_s=pace.seconds(REPLY_TIMEOUT_CHUNKS), client_name="e2e-outage")
        robot.connect()
        box.append(Runner(robot, client, config, status=outage.on_status))
        outage.thread.start()
        result = box[0].run()
        outage.thread.join(config.duration_s)
    finally:
        if client is not None:
            client.close()
        robot.disconnect()
        (server if outage is None else outage.server).stop()
    assert outage.error is None, (outage.error, str(pace))
    assert outage.server.endpoint == endpoint
    held, steps, commands = result.held, result.steps, result.commands
    after_kill = np.flatnonzero(held & (steps > outage.killed_step))
    assert len(after_kill) > 3 and result.summary.watchdog_holds > 0
    first = after_kill[0]
    block = np.arange(first, first + np.argmin(held[first:]))  # the contiguous hold (empty: never resumed)
    assert len(block) > 0, ("the robot held to the end", str(pace))
    assert np.array_equal(commands[block], np.repeat(commands[first - 1 : first], len(block), axis=0))
    # no tick waited for the dead server, and neither did the loop between ticks: a blocking reconnect would hold
    # one for the client's timeout (4 chunk latencies), a loaded machine may skip a deadline or two
    wait_ms = 0.5 * client.timeout_s * 1e3
    gap_ms = (steps[first] - steps[first - 1]) * 1e3 / config.rate_hz
    assert not held[first - 1] and gap_ms < wait_ms, (gap_ms, str(pace))  # held from the next tick on
    assert result.tick_ms[first - 1 : block[-1] + 1].max() < wait_ms, (np.sort(result.tick_ms[block])[-3:], str(pace))
    resumed = [r for r in result.records if r.switch_step is not None and r.switch_step > outage.restarted_step]
    assert len(resumed) >= 2 and not held[-3:].any()  # new chunks run: reconnected without intervention
    assert client.counters["resets"] >= 1 and client.counters["handshakes"] >= 2
