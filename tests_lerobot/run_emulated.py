"""`python -m tests_lerobot.run_emulated STATE.json VLASH_ARGS...`: `vlash` with the SO-101's servos and cameras
emulated (conftest.PORT), for tests that need a process of its own (signals); at exit the servos' torque and goal
counts are written to STATE.json."""

from __future__ import annotations

import json
import sys

import cv2
import scservo_sdk

from tests_lerobot import fake_video, feetech_emulator
from tests_lerobot.conftest import PORT
from vlash.cli.main import main

if __name__ == "__main__":
    scservo_sdk.PortHandler = feetech_emulator.EmulatedPortHandler
    cv2.VideoCapture = fake_video.SyntheticCapture
    servos = feetech_emulator.six_servo_arm(PORT)
    try:
        rc = main(sys.argv[2:])
    finally:
        state = {i: {"torque_on": s.torque_on, "goals": len(s.goals)} for i, s in servos.items()}
        with open(sys.argv[1], "w") as out:
            json.dump(state, out)
    sys.exit(rc)
