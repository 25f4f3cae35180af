"""Ctrl-C (SIGINT) on a `vlash run` process driving LeRobot's real SOFollower on emulated servos: rc 130, the stop
message says the arm's torque is off (limp, issue 45 §1), and every servo's torque really is off."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from robot_io.protocol import CameraSpec, Metadata
from tests.fakes import LoopbackPolicyServer, hold_planner

ROOT = Path(__file__).resolve().parents[1]


def test_ctrl_c_reports_the_arm_limp_and_turns_every_servo_s_torque_off(arm, robot_yaml, tmp_path):
    meta = Metadata("hold", [CameraSpec("top", 224, 224)], 6, 6, 20, 30.0, "fp32", "loopback", 1, "constant", False)
    state = tmp_path / "servos.json"
    with LoopbackPolicyServer("tcp://127.0.0.1:*", hold_planner(20), meta) as server:
        argv = [sys.executable, "-m", "tests_lerobot.run_emulated", str(state), "run", "--server", server.endpoint,
                "--robot", "lerobot:so101_follower", "--robot-config", str(robot_yaml()), "--camera", "top=front",
                "--duration-s", "60"]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        deadline = time.monotonic() + 60
        while server.served < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, out + err
    assert "stopped by SIGINT" in out + err and "torque off" in out + err, out + err
    servos = json.loads(state.read_text())
    assert len(servos) == 6 and all(s["goals"] > 0 and not s["torque_on"] for s in servos.values()), servos
