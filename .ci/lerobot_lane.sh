#!/usr/bin/env bash
# The real LeRobot 0.6.1 lane (issue 45 §2), run by .ci/run after the suite: a Python 3.12 venv (.venv-lerobot/,
# git-ignored) with lerobot[pi,feetech,dataset]==0.6.1, the README's robot-computer install (pip install ".[lerobot]", never
# -c constraints-dev.txt: LeRobot needs torch < 2.12) and pytest; then tests_lerobot/ against LeRobot's real
# SOFollower, FeetechMotorsBus and OpenCVCamera, with only the serial port (scservo_sdk's PortHandler) and
# cv2.VideoCapture emulated. Any failure fails CI (set -e). From a fresh venv: 2 min 12 s (tests 24 s) on a
# 2-core AMD EPYC, load average 0.2 before, 2026-12-06.
set -euo pipefail
cd "$(dirname "$0")/.."
PY312="${PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}"  # any Python 3.12: PY312=... .ci/lerobot_lane.sh
[ -x "$PY312" ] || PY312=python3.12
[ -x .venv-lerobot/bin/python ] || "$PY312" -m venv .venv-lerobot
# [dataset] on both sides: LeRobotDataset loads what --record-dataset wrote (tests_lerobot/test_dataset.py)
.venv-lerobot/bin/pip install -q "lerobot[pi,feetech,dataset]==0.6.1" -e ".[lerobot,dataset]" "pytest>=8"
.venv-lerobot/bin/python -m pytest -q -p no:cacheprovider tests_lerobot
# tools/bench_vs_lerobot.py's CI smoke (it needs LeRobot, so it runs here only): tiny sizes, one round, every row;
# exits 1 when vlash's actions leave LeRobot's on the same checkpoint. It needs vlash's model side too ([server]),
# installed after the tests above, so that in a fresh venv they run on the robot computer's install alone; 18 s on
# the 2-core host under load 3.
.venv-lerobot/bin/pip install -q -e ".[server,lerobot,dataset]"
.venv-lerobot/bin/python tools/bench_vs_lerobot.py --smoke
