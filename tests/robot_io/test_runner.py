"""The runner end to end: SimRobot + executor + safety + fake policy (simulated time), the watchdog when
replies stop, and `vlash run` over real ZeroMQ loopback with torch blocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.robots import SimRobot
from robot_io.runner import RunConfig, Runner
from robot_io.testing import FakePolicyClient, expert_planner, sim_metadata
from tests.import_guard import BLOCK_HEAVY_IMPORTS


def sim_runner(mode="vlash", chunk_length=50, latency_s=0.1, duration_s=6.0, task="reach", **executor):
    robot = SimRobot(task, seed=1)
    robot.connect()
    clock = SimulatedClock()
    meta = sim_metadata(robot, chunk_length)
    client = FakePolicyClient(expert_planner(robot, chunk_length), meta, clock, latency_s)
    config = RunConfig(ExecutorConfig(mode=mode, **executor), rate_hz=30.0, duration_s=duration_s)
    return Runner(robot, client, config, clock), client


def test_vlash_runs_simulated_episodes_with_the_expert_and_logs_every_tick():
    runner, _ = sim_runner("vlash")
    result = runner.run()
    s = result.summary
    assert s.ticks == 180 and s.episodes >= 3 and s.successes == s.episodes
    assert s.missed_deadlines == 0 and s.overruns == 0 and s.delay_steps == 4  # 100 ms at 30 Hz
    assert s.latency_p50_ms == 100.0 and s.requests >= s.chunks > s.episodes
    assert result.commands.shape == result.states.shape == (180, 2)
    assert np.array_equal(result.steps, np.arange(180)) and result.time_s[-1] > 5.9
    ran = {r.chunk_id for r in result.records if r.switch_step is not None}
    assert set(np.unique(result.chunk_ids[result.chunk_ids >= 0])) == ran
    assert not result.held[result.chunk_ids >= 0].any()
    assert s.watchdog_holds == s.waiting_steps == result.held.sum()  # only the by-design waits


def test_each_tick_s_own_work_is_logged():
    runner, _ = sim_runner("vlash", duration_s=1.0)
    send, sent = runner.robot.send_action, []

    def slow_send(action):  # the robot's bus takes 2 ms per command, 7 ms for the sixth
        runner.clock.advance(0.007 if len(sent) == 5 else 0.002)
        sent.append(action)
        return send(action)

    runner.robot.send_action = slow_send
    result = runner.run()
    expected = np.full(30, 2.0)
    expected[5] = 7.0
    assert np.allclose(result.tick_ms, expected)


def test_watchdog_holds_the_last_command_in_the_tick_the_chunk_runs_out():
    runner, client = sim_runner("naive", chunk_length=20, duration_s=2.0, task="track", execution_horizon=10)
    original = client.submit

    def submit_then_die(infer):
        original(infer)
        client.replying = False  # the server dies after answering the first request

    client.submit = submit_then_die
    result = runner.run()
    first = result.records[0]
    assert first.switch_step == 4 and first.switch_index == 0 and result.summary.episodes == 0
    runs_out = 4 + 20  # the first chunk's last index runs at step 23; step 24 has nothing valid
    assert not result.held[4:runs_out].any() and result.held[runs_out:].all()
    assert np.allclose(result.commands[runs_out:], result.commands[runs_out - 1])  # hold the last command
    assert result.summary.missed_deadlines == len(result.steps) - runs_out
    assert result.summary.too_late >= 1 and result.summary.requests >= 3  # it gives up on each and asks again


BLOCKED_RUN = BLOCK_HEAVY_IMPORTS + textwrap.dedent(
    """
    import argparse
    import numpy as np
    from robot_io.protocol import CameraSpec, Metadata
    from robot_io.testing import LoopbackPolicyServer
    from vlash.cli import run_cmd

    cams = [CameraSpec("base_0_rgb", 32, 32)]
    meta = Metadata("hold", cams, 2, 2, 20, 30.0, "fp32", "loopback", 1, "constant", False)
    plan = lambda infer: np.tile(infer.state if infer.future_state is None else infer.future_state, (20, 1))
    with LoopbackPolicyServer("tcp://127.0.0.1:*", plan, meta) as server:
        parser = argparse.ArgumentParser()
        run_cmd.add_parser(parser.add_subparsers())
        args = parser.parse_args(["run", "--server", server.endpoint, "--robot", "sim:reach", "--duration", "1",
                                  "--mode", "vlash", "--timeout", "5"])
        rc = run_cmd.run(args)
        assert server.served >= 2, server.served
    assert rc == 0
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    assert not loaded, loaded
    print("ok")
    """
)


def test_vlash_run_over_zeromq_loopback_without_torch():
    out = subprocess.run([sys.executable, "-c", BLOCKED_RUN], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.rstrip().endswith("ok") and "missed deadlines" in out.stdout
