"""tools/plot_recording.py (the README's picture of a `vlash demo --record` recording) on a recording written here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_io.executors import ChunkRecord
from robot_io.rerun_trace import RerunRecording, RerunTrace

pytest.importorskip("rerun")
ROOT = Path(__file__).resolve().parents[2]
TOOL = [sys.executable, str(ROOT / "tools" / "plot_recording.py")]


def test_the_tool_draws_every_run_of_a_recording(tmp_path):
    with RerunRecording("test", path=tmp_path / "r.rrd") as recording:
        for mode in ("naive", "vlash"):
            trace = RerunTrace(recording, mode, (("a", "b"), ("a", "b")))
            for step in range(40):
                image = np.full((16, 16, 3), step * 5, np.uint8)
                trace.tick(dict(t=step / 30, step=step, state=np.array([step, -step], np.float32), held=step < 3,
                                command=np.array([step, -step], np.float32), chunk=step // 10, index=step % 10,
                                tick_ms=1.0, reset=False, images={"front": image}))  # fmt: skip
            for chunk in range(1, 4):
                trace.chunk(ChunkRecord(chunk, mode, 10 * chunk - 5, 3, 10 * chunk, 2, latency_ms=90.0 + chunk,
                                        reply_step=10 * chunk - 2, switch_step=10 * chunk, status="done"))  # fmt: skip
    done = subprocess.run([*TOOL, str(tmp_path / "r.rrd"), "--out", str(tmp_path / "p.png")], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "p.png").stat().st_size > 20_000


def test_a_missing_recording_is_one_line(tmp_path):
    done = subprocess.run([*TOOL, str(tmp_path / "none.rrd"), "--out", str(tmp_path / "p.png")], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().endswith("none.rrd: no such file")
