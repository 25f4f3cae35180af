"""`lerobot:<type>` robots built through LeRobot's config registry and factory, against the fake LeRobot of
tests/fixtures/fake_lerobot (LeRobot 0.4.4's names and layout; the real one cannot be installed here)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.robots import LeRobotRobot, RobotConfigError, make_robot
from robot_io.robots.lerobot_factory import _candidates, load_robot_config, make_lerobot_robot
from tests.robot_io.lerobot_fixture import SO101_YAML, fake_lerobot_on_path


@pytest.fixture
def fake_lerobot():
    with fake_lerobot_on_path() as path:
        yield path


def test_without_lerobot_the_error_says_how_to_install_it():
    with pytest.raises(RobotConfigError, match=r"not installed: pip install 'vlash\[lerobot\]'"):
        make_robot("lerobot:so101_follower", SO101_YAML)


def test_the_shipped_so101_config_builds_an_so_follower_with_its_cameras(fake_lerobot):
    robot = make_robot("lerobot:so101_follower", SO101_YAML)
    assert isinstance(robot, LeRobotRobot)
    inner = robot.robot
    assert type(inner).__name__ == "SOFollower" and type(inner).__module__ == "lerobot.robots.so_follower"
    assert inner.config.port == "/dev/ttyACM0" and inner.config.id == "my_so101"
    assert (
        inner.config.max_relative_target == 10.0
        and type(inner.config.cameras["wrist"]).__name__ == "OpenCVCameraConfig"
    )
    assert robot.action_names[0] == "shoulder_pan.pos" and robot.action_names[-1] == "gripper.pos"
    assert robot.observation_features["images.front"].shape == (480, 640, 3)
    robot.connect()
    try:
        obs = robot.get_observation()
        assert obs["images"]["wrist"][0, 0, 0] == 1 and obs["state"].shape == (6,)  # camera index 1
        sent = robot.send_action({"action": np.full(6, 30.0, np.float32)})["action"]
        np.testing.assert_allclose(sent[:5], 10.0)  # LeRobot's own max_relative_target clip, reported back
    finally:
        robot.disconnect()
    assert inner.calibrated_on_connect is True and not inner.is_connected


def test_a_type_only_a_scan_of_lerobot_robots_finds_is_built_by_the_plugin_route(fake_lerobot):
    robot = make_lerobot_robot("hope_jr_arm", {"port": "/dev/ttyUSB0"})
    assert type(robot.robot).__name__ == "HopeJrArm" and robot.action_names == [
        "shoulder.pos",
        "elbow.pos",
        "wrist.pos",
    ]


def test_module_candidates_cover_both_so_follower_layouts():
    assert _candidates("lerobot.robots", "so101_follower") == [
        "lerobot.robots.so101_follower",
        "lerobot.robots.so_follower",
    ]
    assert _candidates("lerobot.robots", "koch_follower") == ["lerobot.robots.koch_follower"]


@pytest.mark.parametrize(
    ("robot_type", "fields", "match"),
    [
        ("ur5_arm", {}, r"unknown LeRobot robot type 'ur5_arm'; known types: \['hope_jr_arm', 'so100_follower'"),
        ("so101_follower", {}, r"missing required fields \['port'\]"),
        ("so101_follower", {"port": "p", "speed": 3}, r"unknown fields \['speed'\]"),
        ("so101_follower", {"type": "koch_follower", "port": "p"}, "says type 'koch_follower'"),
        (
            "so101_follower",
            {"port": "p", "cameras": {"f": {"type": "zed", "width": 1}}},
            "unknown LeRobot camera type 'zed'",
        ),
        (
            "so101_follower",
            {"port": "p", "cameras": {"f": {"type": "opencv", "index_or_path": 0}}},
            "width must be set",
        ),
    ],
)
def test_config_errors_are_one_clear_line(fake_lerobot, robot_type, fields, match):
    with pytest.raises(RobotConfigError, match=match) as err:
        make_lerobot_robot(robot_type, fields)
    assert "\n" not in str(err.value)


def test_a_robot_module_that_fails_to_import_is_named(fake_lerobot, tmp_path, monkeypatch):
    import lerobot.robots

    # a robot module of lerobot.robots whose driver SDK is not installed
    monkeypatch.setattr(lerobot.robots, "__path__", [*lerobot.robots.__path__, str(tmp_path)])
    (tmp_path / "feetech_arm.py").write_text("import scservo_sdk\n")
    with pytest.raises(RobotConfigError, match=r"failed to import: lerobot.robots.feetech_arm \(ModuleNotFoundError"):
        make_lerobot_robot("feetech_arm", {"port": "p"})


def test_robot_config_files_are_read_with_clear_errors(tmp_path):
    assert load_robot_config(SO101_YAML)["cameras"]["front"]["type"] == "opencv"
    (tmp_path / "empty.yaml").write_text("")
    assert load_robot_config(tmp_path / "empty.yaml") == {}
    (tmp_path / "list.yaml").write_text("- port\n")
    (tmp_path / "bad.yaml").write_text("port: [\n")
    for name, match in (
        ("list.yaml", "expected a mapping"),
        ("bad.yaml", "not valid YAML"),
        ("nope.yaml", "cannot read"),
    ):
        with pytest.raises(RobotConfigError, match=match):
            load_robot_config(tmp_path / name)
