"""What a LeRobot arm meets around the run, against the fake LeRobot (tests/fixtures/fake_lerobot, whose SO follower
connects, calibrates and disconnects as LeRobot 0.6.1's does): a calibration question with no terminal to answer it
(one line naming lerobot-calibrate, the motor bus released, the prompt's line ended), a connect that fails part way,
and what a stopped run reports the arm is left doing once LeRobot disconnects it (torque off, or holding)."""

from __future__ import annotations

import io
import os
import sys
import threading

import pytest

from robot_io.control import SimulatedClock
from robot_io.executors import ExecutorConfig
from robot_io.protocol import Metadata
from robot_io.protocol.errors import RobotIOError
from robot_io.robots import make_robot
from robot_io.robots.lerobot_factory import load_robot_config, make_lerobot_robot
from robot_io.robots.lerobot_robot import CalibrationRequired, ConnectFailed
from robot_io.runner import RunConfig, run_robot
from tests.fakes import PointArm, hold_planner
from tests.robot_io.lerobot_fixture import SO101_YAML, fake_lerobot_on_path
from vlash.sim.policy_link import SimulatedPolicyLink

PROMPT = ("Press ENTER to use provided calibration file associated with the id my_so101, or type 'c' and press ENTER "
          "to run calibration: ")  # fmt: skip
CALIBRATE = "lerobot-calibrate --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=my_so101"


@pytest.fixture
def so_follower():
    """The fake LeRobot's so_follower module, its motors not calibrated (connect asks with input())."""
    with fake_lerobot_on_path():
        import lerobot.robots.so_follower as module

        module.MOTORS_CALIBRATED = False
        yield module


def no_terminal(kind: str):
    """Standard input as a service gets it: /dev/null (systemd, `< /dev/null`), nohup's unreadable file, none."""
    if kind == "devnull":
        return open(os.devnull)  # noqa: SIM115 (closed by the test)
    if kind == "nohup":
        return os.fdopen(os.open(os.devnull, os.O_WRONLY), "r")
    return None


@pytest.mark.parametrize("stdin_kind", ["devnull", "nohup", "closed"])
def test_a_calibration_question_without_a_terminal_is_one_line_naming_lerobot_calibrate(
    so_follower, monkeypatch, capsys, stdin_kind
):
    stdin = no_terminal(stdin_kind)
    monkeypatch.setattr(sys, "stdin", stdin)
    robot = make_robot("lerobot:so101_follower", SO101_YAML)
    try:
        with pytest.raises(CalibrationRequired) as err:
            robot.connect()
    finally:
        if stdin is not None:
            stdin.close()
    message = str(err.value)
    assert "\n" not in message and message.startswith("the so101_follower arm 'my_so101' needs calibrating")
    assert message.endswith(f"calibrate it once from a terminal: {CALIBRATE}")
    arm = robot.robot
    assert not arm.bus.is_connected and arm.bus.closed_with_torque_off == [True]  # released, as its config says
    assert not any(cam.is_connected for cam in arm.cameras.values())
    assert sys.stdin is stdin  # put back
    assert capsys.readouterr().out == PROMPT + "\n"  # the prompt's line ended: what follows starts its own


def test_a_question_answered_through_a_pipe_connects_and_its_prompt_line_ends(so_follower, monkeypatch, capsys):
    stdin = io.StringIO("\n")  # `echo | vlash run ...`: ENTER, the calibration file is used
    monkeypatch.setattr(sys, "stdin", stdin)
    stdout = sys.stdout
    robot = make_robot("lerobot:so101_follower", SO101_YAML)
    robot.connect()
    try:
        assert robot.robot.is_connected and robot.robot.bus.torque_enabled
        assert sys.stdin is stdin and sys.stdout is stdout
        print("step      0  chunks    0")
    finally:
        robot.disconnect()
    assert capsys.readouterr().out.splitlines() == [PROMPT, "step      0  chunks    0"]


def test_a_connect_that_fails_part_way_releases_the_bus_and_says_what_to_check_in_one_line(so_follower, monkeypatch):
    so_follower.MOTORS_CALIBRATED = True
    robot = make_robot("lerobot:so101_follower", SO101_YAML)
    wrist = robot.robot.cameras["wrist"]

    def unplugged(warmup: bool = True) -> None:  # LeRobot's messages run over several lines
        raise ConnectionError("camera 1: no such device.\nTry running `lerobot-find-cameras`\n")

    monkeypatch.setattr(wrist, "connect", unplugged)
    with pytest.raises(ConnectFailed) as failed:  # not a calibration question
        robot.connect()
    assert str(failed.value) == (
        "the so101_follower could not connect: camera 1: no such device. Try running `lerobot-find-cameras` (check the "
        "port and the cameras in its --robot-config, and that the arm is powered and plugged in)"
    )
    arm = robot.robot
    assert not arm.bus.is_connected and not arm.cameras["front"].is_connected
    robot.disconnect()  # nothing left to release: no error (LeRobot's own disconnect() would refuse)
    assert arm.bus.closed_with_torque_off == [True]


class FailsToConnect(PointArm):
    """A robot whose connect opens something and then fails."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = False

    def connect(self) -> None:
        self.opened = True
        raise RobotIOError("no answer from the arm's controller")

    def disconnect(self) -> None:
        self.opened = False


def test_run_robot_disconnects_a_robot_whose_connect_failed():
    robot, clock = FailsToConnect(), SimulatedClock()
    meta = Metadata("point", [], 2, 2, 20, 30.0, "fp32", "fake", 1, "constant", False)
    link = SimulatedPolicyLink(hold_planner(20), meta, clock)
    with pytest.raises(RobotIOError, match="no answer"):
        run_robot(robot, link, RunConfig(duration_s=1.0), clock)
    assert not robot.opened


@pytest.mark.parametrize(
    ("torque_off", "left"),
    [
        (True, "has its torque off (disable_torque_on_disconnect: true in its config): the arm is limp and may fall "
               "under gravity; disable_torque_on_disconnect: false keeps it holding its last command"),
        (False, "holds the last command sent"),
    ],
)  # fmt: skip
def test_a_stopped_arm_is_reported_as_disconnecting_leaves_it(so_follower, torque_off, left):
    so_follower.MOTORS_CALIBRATED = True
    fields = {**load_robot_config(SO101_YAML), "cameras": {}, "disable_torque_on_disconnect": torque_off}
    robot, clock, stop = make_lerobot_robot("so101_follower", fields), SimulatedClock(), threading.Event()
    meta = Metadata("hold", [], 6, 6, 20, 30.0, "fp32", "fake", 1, "constant", False)
    link = SimulatedPolicyLink(hold_planner(20), meta, clock, latency_s=0.05)
    config = RunConfig(ExecutorConfig("vlash", execution_horizon=5), rate_hz=30.0, duration_s=10.0)
    result = run_robot(robot, link, config, clock, status=lambda s: stop.set() if s["chunks"] >= 3 else None,
                       stop=stop)  # fmt: skip
    bus = robot.robot.bus
    assert result.stopped and result.summary.ticks < 300 and not bus.is_connected
    assert bus.torque_enabled is not torque_off  # what the fake arm really is left doing ...
    assert result.left == left  # ... is what the run says
