"""`vlash run` with a LeRobot arm that asks to be calibrated on connect (the fake LeRobot of
tests/fixtures/fake_lerobot, its motors not calibrated), through the real command line and a loopback server: with
no terminal (`< /dev/null`, systemd) one line naming lerobot-calibrate, rc 2, the motor bus released; with the
answer piped in, the run goes on and the prompt does not share its line with the status line."""

from __future__ import annotations

import io
import os
import sys

import pytest

from tests.cli.test_run_cmd import SO101_MAP, run_argv, so101_metadata
from tests.fakes import LoopbackPolicyServer, hold_planner
from tests.robot_io.lerobot_fixture import fake_lerobot_on_path
from vlash.cli.main import main

PROMPT = ("Press ENTER to use provided calibration file associated with the id my_so101, or type 'c' and press ENTER "
          "to run calibration: ")  # fmt: skip


@pytest.fixture
def so_follower():
    with fake_lerobot_on_path():
        import lerobot.robots.so_follower as module

        module.MOTORS_CALIBRATED = False
        yield module


def test_no_terminal_to_answer_calibration_is_one_line_with_the_command_and_the_bus_is_released(
    so_follower, monkeypatch, capsys
):
    with open(os.devnull) as devnull:
        monkeypatch.setattr(sys, "stdin", devnull)
        with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
            rc = main(run_argv(server.endpoint, *SO101_MAP))
            assert server.served == 0
    out, err = capsys.readouterr()
    assert rc == 2 and err == (
        "vlash run: error: CalibrationRequired: the so101_follower arm 'my_so101' needs calibrating, and LeRobot asks "
        "for it on a terminal this run does not have (standard input gave no answer); calibrate it once from a "
        "terminal: lerobot-calibrate --robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.id=my_so101\n"
    )
    arm = so_follower.INSTANCES[-1]
    assert not arm.sent and not arm.bus.is_connected and arm.bus.closed_with_torque_off == [True]
    assert out == PROMPT + "\n"  # the prompt's line ends before anything else is printed


def test_a_piped_answer_runs_and_the_prompt_keeps_its_own_line(so_follower, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))  # `echo | vlash run ...`: ENTER, use the calibration file
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), so101_metadata()) as server:
        assert main(run_argv(server.endpoint, *SO101_MAP)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == PROMPT and lines[1].startswith("step ")  # the status line starts a line of its own
    assert so_follower.INSTANCES[-1].sent and not so_follower.INSTANCES[-1].bus.is_connected
