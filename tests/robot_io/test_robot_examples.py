"""examples/run_client.py, lerobot_arm.py and custom_robot.py: `--help` without torch, gymnasium or OpenCV, and a
short run of each against a torch-free loopback policy server over ZeroMQ (the LeRobot arm: the fake LeRobot)."""

from __future__ import annotations

import runpy
import subprocess
import sys
import textwrap

import pytest

from robot_io.protocol import CameraSpec, Metadata
from tests.fakes import LoopbackPolicyServer, hold_planner
from tests.import_guard import BLOCK_HEAVY_IMPORTS
from tests.robot_io.lerobot_fixture import ROOT, SO101_YAML, fake_lerobot_on_path

EXAMPLES = ROOT / "examples"
CAMERAS = [CameraSpec("base_0_rgb", 32, 32), CameraSpec("left_wrist_0_rgb", 32, 32)]

HELP = BLOCK_HEAVY_IMPORTS + textwrap.dedent(
    """
    HEAVY = (*HEAVY, "gymnasium", "cv2", "rich", "lerobot", "draccus")
    import runpy
    sys.argv = [sys.argv[1], "--help"]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        assert exc.code == 0, exc.code
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    assert not loaded, loaded
    """
)


def metadata(state_dim: int, action_dim: int) -> Metadata:
    return Metadata("hold", CAMERAS, state_dim, action_dim, 20, 30.0, "fp32", "loopback", 1, "constant", False)


def example_main(name: str):
    return runpy.run_path(str(EXAMPLES / f"{name}.py"))["main"]


@pytest.mark.parametrize("name", ["run_client", "lerobot_arm", "custom_robot"])
def test_help_needs_no_torch_gymnasium_or_opencv(name):
    out = subprocess.run([sys.executable, "-c", HELP, str(EXAMPLES / f"{name}.py")], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage:" in out.stdout and "--server" in out.stdout and "--camera" in out.stdout


@pytest.mark.sim  # the simulated arm (gymnasium, OpenCV)
def test_run_client_drives_the_simulated_arm(capsys):
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), metadata(2, 2)) as server:
        assert example_main("run_client")(["--server", server.endpoint, "--duration-s", "1", "--mode", "prefix"]) == 0
        requests = list(server.requests)
    assert len(requests) >= 2 and all(list(r.images) == ["base_0_rgb"] for r in requests)  # the sim's one camera
    assert any(r.prefix is not None for r in requests)  # prefix mode
    out = capsys.readouterr().out
    assert "{'base_0_rgb': 'base_0_rgb', 'left_wrist_0_rgb': None}" in out and "missed deadlines:" in out


def test_lerobot_arm_builds_the_so101_through_lerobot_and_runs_it(capsys):
    with fake_lerobot_on_path():
        from lerobot.robots.so_follower import INSTANCES

        with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), metadata(6, 6)) as server:
            argv = ["--server", server.endpoint, "--robot-config", str(SO101_YAML), "--port", "/dev/ttyUSB3",
                    "--camera", "base_0_rgb=wrist", "--camera", "left_wrist_0_rgb=none",
                    "--duration-s", "1"]  # fmt: skip
            assert example_main("lerobot_arm")(argv) == 0
            requests = list(server.requests)
        arm = INSTANCES[-1]
        assert arm.config.port == "/dev/ttyUSB3" and arm.config.id == "my_so101" and arm.sent
    assert requests and all(r.images["base_0_rgb"][0, 0, 0] == 1 and len(r.images) == 1 for r in requests)
    assert "chunks run:" in capsys.readouterr().out


def test_lerobot_arm_without_lerobot_is_one_clear_error(capsys):
    assert example_main("lerobot_arm")(["--robot-config", str(SO101_YAML)]) == 2
    assert "pip install 'vlash[lerobot]'" in capsys.readouterr().err


def test_custom_robot_with_a_longer_state_than_action_runs_in_vlash_mode(capsys):
    state_index = [*range(7), 14]  # joint positions and the gripper width within the 15-entry state
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20, state_index), metadata(15, 8)) as server:
        argv = ["--server", server.endpoint, "--camera", "base_0_rgb=wrist", "--duration-s", "1"]
        assert example_main("custom_robot")(argv) == 0
        requests = list(server.requests)
    rolled = [r for r in requests if r.future_state is not None]
    assert rolled and all(r.state.shape == (15,) and r.future_state.shape == (15,) for r in rolled)
    assert all(list(r.images) == ["base_0_rgb"] and r.images["base_0_rgb"].shape == (96, 128, 3) for r in requests)
    out = capsys.readouterr().out
    assert "stall watchdog holds:" in out and "holds with nothing sent: 0" in out


def test_custom_robot_against_a_policy_of_other_dims_is_refused(capsys):
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), metadata(14, 7)) as server:
        assert example_main("custom_robot")(["--server", server.endpoint, "--duration-s", "1"]) == 2
    assert (
        "expects state_dim 14 and action_dim 7; the robot (SevenJointArm) has state_dim 15" in capsys.readouterr().err
    )
