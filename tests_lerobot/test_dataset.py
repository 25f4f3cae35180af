"""`vlash run --record-dataset` on LeRobot's real SO-101 classes (emulated servos and cameras), with both of vlash's
writers (LeRobot's own LeRobotDataset where it imports, vlash's pyarrow writer otherwise), loaded by LeRobot 0.6.1's
real `LeRobotDataset`."""

from __future__ import annotations

import pytest

import robot_io.dataset
from robot_io.protocol import CameraSpec, Metadata
from tests.fakes import LoopbackPolicyServer, hold_planner
from vlash.cli.main import main

pytest.importorskip("lerobot.datasets.lerobot_dataset")


@pytest.mark.parametrize("lerobot_writer", [True, False])
def test_a_recorded_run_loads_in_lerobots_dataset(arm, robot_yaml, tmp_path, monkeypatch, capsys, lerobot_writer):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    if not lerobot_writer:
        monkeypatch.setattr(robot_io.dataset, "lerobot_available", lambda: False)
    meta = Metadata("hold", [CameraSpec("top", 224, 224)], 6, 6, 20, 30.0, "fp32", "loopback", 1, "constant", False)
    target = tmp_path / "rollouts"
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), meta) as server:
        rc = main(["run", "--server", server.endpoint, "--robot", "lerobot:so101_follower", "--robot-config",
                   str(robot_yaml()), "--camera", "top=front", "--duration-s", "1", "--record-dataset", str(target),
                   "--prompt", "pick the cube"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    assert ("pyarrow" in out) is not lerobot_writer  # the writer the line names
    dataset = LeRobotDataset("local/rollouts", root=target)
    assert dataset.num_episodes == 1 and dataset.num_frames >= 20
    frame = dataset[0]
    assert tuple(frame["action"].shape) == (6,) and frame["task"] == "pick the cube"
    assert {k for k in frame if k.startswith("observation.images.")} == {"observation.images.front",
                                                                          "observation.images.wrist"}  # fmt: skip
