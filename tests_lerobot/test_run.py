"""`vlash run --robot lerobot:so101_follower --camera top=front` through the real command line, LeRobot's real classes
on emulated servos and cameras, against a torch-free loopback policy server over ZeroMQ (tests/fakes.py)."""

from __future__ import annotations

from robot_io.protocol import CameraSpec, Metadata
from tests.fakes import LoopbackPolicyServer, hold_planner
from vlash.cli.main import main


def test_a_short_run_maps_the_camera_commands_the_servos_and_ends_with_the_torque_off(arm, robot_yaml, capsys):
    meta = Metadata("hold", [CameraSpec("top", 224, 224)], 6, 6, 20, 30.0, "fp32", "loopback", 1, "constant", False)
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), meta) as server:
        rc = main(["run", "--server", server.endpoint, "--robot", "lerobot:so101_follower", "--robot-config",
                   str(robot_yaml()), "--camera", "top=front", "--mode", "vlash", "--duration-s", "1"])  # fmt: skip
        requests = list(server.requests)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert len(requests) >= 2 and all(sorted(r.images) == ["top"] for r in requests)
    assert all(r.images["top"][0, 0, 0] == 0 for r in requests)  # front is camera index 0
    assert all(len(s.goals) >= 10 for s in arm.values())  # the servos got the commands
    assert not any(s.torque_on for s in arm.values())  # LeRobot's disconnect turned the torque off
