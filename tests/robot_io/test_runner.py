"""The runner end to end: SimRobot + executor + safety + fake policy (simulated time), the watchdog when
replies stop, and `vlash run` over real ZeroMQ loopback with torch blocked. A custom robot whose state is longer
than its action: vlash mode, the hold in action space, setup refusals, and the stall watchdog thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from robot_io import ArraySpec, ShapeError
from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.protocol import CameraSpec, Metadata
from robot_io.robots import LeRobotRobot
from robot_io.runner import RunConfig, Runner
from tests.import_guard import BLOCK_HEAVY_IMPORTS
from vlash.sim.oracle import expert_planner, sim_metadata
from vlash.sim.policy_link import SimulatedPolicyLink
from vlash.sim.robot import SimRobot


def sim_runner(mode="vlash", chunk_length=50, latency_s=0.1, duration_s=6.0, task="reach", settings=None, **executor):
    robot = SimRobot(task, seed=1, settings=settings)
    robot.connect()
    clock = SimulatedClock()
    meta = sim_metadata(robot, chunk_length)
    client = SimulatedPolicyLink(expert_planner(robot, chunk_length), meta, clock, latency_s)
    config = RunConfig(ExecutorConfig(mode=mode, **executor), rate_hz=30.0, duration_s=duration_s)
    return Runner(robot, client, config, clock), client


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
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
    assert s.unexpected_holds == s.link_losses == 0 and s.unusable_reason() is None
    resets = np.flatnonzero(result.resets).tolist()  # each new episode's first tick (one env step per tick)
    assert (
        len(resets) >= s.episodes - 1
        and resets == np.cumsum([e.steps for e in result.episodes])[: len(resets)].tolist()
    )


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
def test_vlash_rolls_only_the_commanded_joints_of_a_simulated_state_with_extras():
    from vlash.sim import load_sim_settings

    settings = load_sim_settings(None, ["observe=[joint_velocity,target]"])
    runner, client = sim_runner("vlash", duration_s=6.0, task="hold", settings=settings)
    sent = []
    submit = client.submit
    client.submit = lambda infer: (sent.append(infer), submit(infer))[1]
    result = runner.run()
    assert result.states.shape[1] == 8 and result.commands.shape[1] == 2 and result.summary.successes >= 1
    futures = [infer for infer in sent if infer.future_state is not None]
    assert futures and all(np.array_equal(i.future_state[2:], i.state[2:]) for i in futures)  # extras as observed
    # the joints: the last command before the switch (absolute targets), not the observed positions
    assert any(np.abs(i.future_state[:2] - i.state[:2]).max() > 1e-3 for i in futures)


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
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


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
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
    assert result.summary.missed_deadlines == len(result.steps) - runs_out == result.summary.unexpected_holds
    assert result.summary.too_late >= 1 and result.summary.requests >= 3  # it gives up on each and asks again


BLOCKED_RUN = BLOCK_HEAVY_IMPORTS + textwrap.dedent(
    """
    HEAVY = (*HEAVY, "rich")  # the robot-side install has no rich either
    import numpy as np
    from robot_io.protocol import CameraSpec, Metadata
    from tests.fakes import LoopbackPolicyServer
    from vlash.cli import run_cmd

    cams = [CameraSpec("base_0_rgb", 32, 32)]
    meta = Metadata("hold", cams, 2, 2, 20, 30.0, "fp32", "loopback", 1, "constant", False)
    plan = lambda infer: np.tile(infer.state if infer.future_state is None else infer.future_state, (20, 1))
    with LoopbackPolicyServer("tcp://127.0.0.1:*", plan, meta) as server:
        args = run_cmd.COMMAND.parse(["--server", server.endpoint, "--robot", "sim:reach", "--duration-s", "1",
                                      "--mode", "vlash", "--timeout", "5"])
        rc = run_cmd.run(args)
        assert server.served >= 2, server.served
    assert rc == 0
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    assert not loaded, loaded
    print("ok")
    """
)


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
def test_vlash_run_over_zeromq_loopback_without_torch():
    out = subprocess.run([sys.executable, "-c", BLOCKED_RUN], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.rstrip().endswith("ok") and "missed deadlines" in out.stdout


class FakeArm:
    """A custom robot: the state is 3 joint positions plus 2 other readings, the action the 3 joint targets;
    goals are reached at once. Records every send with the thread it came from."""

    state_names = ["a.pos", "a.vel", "b.pos", "c.pos", "force"]
    action_names = ["a.pos", "b.pos", "c.pos"]
    holds_position = False  # a streaming controller: the runner's stall watchdog covers it

    def __init__(self):
        self.pos = np.array([0.1, 0.2, 0.3], np.float32)
        self.sends: list[tuple[str, np.ndarray]] = []
        self.stall_at: int | None = None  # observation number at which the loop thread stalls
        self.clock: SimulatedClock | None = None
        self.watchdog_sent = threading.Event()
        self.observations = 0

    @property
    def observation_features(self):
        return {"state": ArraySpec("state", (5,), "float32"), "images.cam": ArraySpec("cam", (4, 4, 3), "uint8")}

    @property
    def action_features(self):
        return {"action": ArraySpec("action", (3,), "float32")}

    def connect(self):
        pass

    def disconnect(self):
        pass

    def get_observation(self):
        self.observations += 1
        if self.observations == self.stall_at:  # stuck in a driver call: simulated time passes, no tick completes
            self.clock.advance(1.0)
            assert self.watchdog_sent.wait(10.0), "the stall watchdog never commanded the hold"
        p = self.pos
        state = np.array([p[0], 9.0, p[1], p[2], 7.0], np.float32)
        return {"state": state, "images": {"cam": np.zeros((4, 4, 3), np.uint8)}, "capture_time_ns": 1}

    def send_action(self, action):
        thread = threading.current_thread().name
        self.sends.append((thread, np.array(action["action"])))
        if thread == "stall-watchdog":
            self.watchdog_sent.set()
        self.pos = np.asarray(action["action"], np.float32)
        return {"action": self.pos.copy()}


class UnnamedArm(FakeArm):
    state_names = action_names = None  # it does not say which state entries its joints are


def ramp_planner(infer):
    """Chunks that move every joint by +0.01 per index from the planning state's joints."""
    start = (infer.state if infer.future_state is None else infer.future_state)[[0, 2, 3]]
    return start + 0.01 * np.arange(1, 21, dtype=np.float32)[:, None]


def arm_metadata(state_dim=5, action_dim=3, camera="cam"):
    return Metadata("ramp", [CameraSpec(camera, 4, 4)], state_dim, action_dim, 20, 30.0, "fp32", "fake", 1,
                    "constant", False)  # fmt: skip


def arm_runner(robot, mode="vlash", meta=None, **run):
    clock = SimulatedClock()
    client = SimulatedPolicyLink(ramp_planner, meta or arm_metadata(), clock, latency_s=0.05)
    config = RunConfig(ExecutorConfig(mode=mode, execution_horizon=5, initial_delay=2, adapt_delay=False),
                       rate_hz=30.0, duration_s=1.0, **run)  # fmt: skip
    return Runner(robot, client, config, clock), client


def test_a_state_longer_than_the_action_runs_in_vlash_mode_and_holds_in_action_space():
    robot = FakeArm()
    runner, client = arm_runner(robot, max_step=0.5)
    result = runner.run()
    assert result.states.shape == (30, 5) and result.commands.shape == (30, 3)
    waiting = result.held & (result.chunk_ids < 0)
    assert waiting[0] and np.allclose(result.commands[waiting], [0.1, 0.2, 0.3])  # hold = measured joint positions
    assert result.summary.chunks >= 3 and result.summary.unsent_ticks == 0
    later = [r for r in client.requests if r.future_state is not None]
    assert later and all(r.future_state.shape == (5,) for r in later)
    for infer in later:  # the joints rolled forward to the switch, the other readings as observed
        record = next(r for r in result.records if r.chunk_id == infer.request_id)
        np.testing.assert_allclose(infer.future_state[[0, 2, 3]], result.commands[record.planned_switch_step - 1])
        np.testing.assert_allclose(infer.future_state[[1, 4]], [9.0, 7.0])


def test_a_robot_that_names_nothing_sends_nothing_until_the_first_chunk_and_cannot_run_vlash():
    robot = UnnamedArm()
    result = arm_runner(robot, mode="naive")[0].run()
    s = result.summary
    assert s.waiting_steps > 0 and s.unsent_ticks == s.waiting_steps and s.chunks >= 3
    assert len(robot.sends) == s.ticks - s.unsent_ticks  # the robot's own controller held meanwhile
    assert np.isnan(result.commands[: s.waiting_steps]).all() and not np.isnan(result.commands[s.waiting_steps :]).any()
    with pytest.raises(ShapeError, match="vlash mode rolls the state forward"):
        arm_runner(UnnamedArm(), mode="vlash")[0].run()
    with pytest.raises(ShapeError, match="max_step needs the measured positions"):
        arm_runner(UnnamedArm(), mode="naive", max_step=0.1)[0].run()


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        (arm_metadata(state_dim=6), r"expects state_dim 6 and action_dim 3; the robot \(FakeArm\) has state_dim 5 and"),
        (arm_metadata(action_dim=4), r"action_dim 4; the robot \(FakeArm\) has state_dim 5 and action_dim 3"),
        (arm_metadata(camera="base_0_rgb"), r"The policy's cameras: \['base_0_rgb'\]; the robot's cameras: \['cam'\]"),
    ],
)
def test_a_robot_that_does_not_fit_the_policy_is_refused_at_setup(meta, match):
    robot = FakeArm()
    with pytest.raises(ShapeError, match=match):
        arm_runner(robot, meta=meta)[0].run()
    assert not robot.sends


def test_an_explicit_camera_map_feeds_a_differently_named_policy_camera():
    runner, client = arm_runner(FakeArm(), meta=arm_metadata(camera="base_0_rgb"), camera_map={"base_0_rgb": "cam"})
    runner.run()
    assert all(list(r.images) == ["base_0_rgb"] for r in client.requests)


def test_a_stalled_loop_thread_gets_the_hold_from_the_watchdog_thread():
    robot = FakeArm()
    runner, _ = arm_runner(robot)
    robot.clock, robot.stall_at = runner.clock, 15
    result = runner.run()
    from_watchdog = [i for i, (thread, _) in enumerate(robot.sends) if thread == "stall-watchdog"]
    assert from_watchdog and result.summary.stall_holds == len(from_watchdog) >= 1
    first = from_watchdog[0]
    assert first == 14  # 14 ticks sent before the stall (in the 15th observation)
    np.testing.assert_array_equal(robot.sends[first][1], robot.sends[first - 1][1])  # the hold: the last command
    assert runner.watchdog._thread is None  # stopped with the run


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
def test_robots_that_hold_position_themselves_get_no_watchdog_thread():
    from tests.robot_io.test_robots import FakeLeRobot

    assert Runner(LeRobotRobot(FakeLeRobot()), None, RunConfig()).watchdog is None
    runner, _ = sim_runner(duration_s=0.5)
    assert runner.watchdog is None and runner.run().summary.stall_holds == 0


def test_run_config_is_validated():
    with pytest.raises(ValueError, match="status_every_s must be > 0"):
        RunConfig(status_every_s=0.0)
    with pytest.raises(ValueError, match="stall_timeout_s must exceed two control periods"):
        RunConfig(rate_hz=10.0, stall_timeout_s=0.15)
    assert RunConfig(rate_hz=30.0).stall_timeout == 0.25 and RunConfig(rate_hz=5.0).stall_timeout == 0.8
