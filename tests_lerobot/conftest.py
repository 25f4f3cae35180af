"""The real LeRobot 0.6.1 (Python 3.12, .ci/lerobot_lane.sh) with its hardware emulated: the Feetech servos behind
scservo_sdk's PortHandler (feetech_emulator.py) and the cameras behind cv2.VideoCapture (fake_video.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests_lerobot import fake_video, feetech_emulator

PORT = "/dev/emulated-so101"
SO101_YAML = Path(__file__).resolve().parents[1] / "configs" / "robots" / "so101.yaml"


@pytest.fixture
def arm(monkeypatch):
    import cv2
    import scservo_sdk

    monkeypatch.setattr(scservo_sdk, "PortHandler", feetech_emulator.EmulatedPortHandler)
    monkeypatch.setattr(cv2, "VideoCapture", fake_video.SyntheticCapture)
    yield feetech_emulator.six_servo_arm(PORT)
    feetech_emulator.ARMS.clear()


def calibration(range_max: int = 4095) -> dict:
    names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    return {n: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": range_max}
            for i, n in enumerate(names)}  # fmt: skip


@pytest.fixture
def robot_yaml(tmp_path):
    """configs/robots/so101.yaml's fields on the emulated port, 224x224 cameras and a calibration file the servos'
    own (matching) values; `robot_yaml(range_max=...)` writes one that does not match."""

    def write(range_max: int = 4095):
        (tmp_path / "calib").mkdir(exist_ok=True)
        (tmp_path / "calib" / "my_so101.json").write_text(json.dumps(calibration(range_max)))
        fields = yaml.safe_load(SO101_YAML.read_text())
        fields.update(port=PORT, calibration_dir=str(tmp_path / "calib"))
        for cam in fields["cameras"].values():
            cam.update(width=224, height=224)
        path = tmp_path / "so101.yaml"
        path.write_text(yaml.safe_dump(fields))
        return path

    return write
