"""robot_io.rerun_trace: what `vlash run --display / --record` log, written headless and read back with rerun's own
reader; the control loop only hands ticks over (frames dropped, never queued without bound, when the worker lags)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from robot_io.executors import ChunkRecord
from robot_io.rerun_trace import RerunError, RerunRecording, RerunTrace, read_recording

pytest.importorskip("rerun")  # the [viz] extra; the robot side's own install (tests/packaging) has no rerun
cv2 = pytest.importorskip("cv2")  # decodes the recorded JPEGs (the [sim] extra)


def row(step: int, images=None) -> dict:
    return dict(t=step / 30, step=step, state=np.array([step, -step, 0.5], np.float32), held=step == 3,
                command=None if step == 0 else np.array([step, 2 * step], np.float32), chunk=step // 4,
                index=step % 4, tick_ms=0.5, reset=False, images=images)  # fmt: skip


def test_two_runs_in_one_recording_read_back_under_their_roots(tmp_path):
    frame = {"front": np.full((24, 32, 3), 200, np.uint8)}
    names = (("shoulder.pos", "elbow.pos", "load"), ("shoulder.pos", "elbow.pos"))
    with RerunRecording("test", path=tmp_path / "runs" / "r.rrd") as recording:
        for root in ("sync", "vlash"):
            trace = RerunTrace(recording, root, names, image_every=2)
            for step in range(8):
                trace.tick(row(step, frame))
            trace.chunk(ChunkRecord(1, root, 0, 2, 2, 2, latency_ms=41.5, reply_step=2, switch_step=2, status="done"))
            trace.chunk(ChunkRecord(2, root, 4, 2, 6, 2, status="dropped"))
            trace.summary({"ticks": 8, "mode": root})
    got = read_recording(tmp_path / "runs" / "r.rrd")
    for root in ("sync", "vlash"):
        assert got[f"{root}/state/load"]["Scalars:scalars"] == [[0.5]] * 8
        assert got[f"{root}/command/elbow.pos"]["step"] == list(range(1, 8))  # step 0 sent nothing
        assert got[f"{root}/command/elbow.pos"]["Scalars:scalars"] == [[2.0 * s] for s in range(1, 8)]
        assert got[f"{root}/held"]["Scalars:scalars"][3] == [1.0]
        assert got[f"{root}/camera/front"]["step"] == [0, 2, 4, 6]
        assert got[f"{root}/camera/front"]["EncodedImage:media_type"][0] == ["image/jpeg"]
        assert got[f"{root}/latency_ms"] == {"step": [2], "Scalars:scalars": [[41.5]]}
        texts = [t[0] for t in got[f"{root}/chunks"]["TextLog:text"]]
        assert texts[0] == f"chunk 1 ({root}): requested at step 0, done, took over at step 2, latency 41.5 ms"
        assert texts[1].startswith(f"chunk 2 ({root}): requested at step 4, dropped")
        assert got[f"{root}/chunks"]["TextLog:level"] == [["INFO"], ["WARN"]]
        assert f'"mode": "{root}"' in got[f"{root}/summary"]["TextDocument:text"][0][0]


def test_a_lagging_worker_drops_frames_not_series(tmp_path, monkeypatch):
    monkeypatch.setattr("robot_io.rerun_trace.MAX_FRAMES_QUEUED", 2)
    release = threading.Event()
    with RerunRecording("test", path=tmp_path / "r.rrd") as recording:
        trace = RerunTrace(recording)
        trace._work.put(release.wait)  # the worker is busy: nothing is logged until released
        for step in range(6):
            trace.tick(row(step, {"cam": np.zeros((8, 8, 3), np.uint8)}))
        release.set()
    got = read_recording(tmp_path / "r.rrd")
    assert trace.dropped_frames == 4 and got["camera/cam"]["step"] == [0, 1]
    assert got["state/joint0"]["step"] == list(range(6))  # no names given: joint0, joint1, ...


def test_frames_are_copied_when_handed_over(tmp_path):
    image = np.zeros((8, 8, 3), np.uint8)
    release = threading.Event()
    with RerunRecording("test", path=tmp_path / "r.rrd") as recording:
        trace = RerunTrace(recording)
        trace._work.put(release.wait)
        trace.tick(row(0, {"cam": image}))
        image[:] = 255  # the robot reuses its buffer before the worker encodes
        release.set()
    jpeg = read_recording(tmp_path / "r.rrd")["camera/cam"]["EncodedImage:blob"][0]
    decoded = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == (8, 8, 3) and decoded.max() < 10


def test_no_rerun_and_no_screen_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "rerun", None)
    with pytest.raises(RerunError, match=r"need rerun: pip install 'vlash\[viz\]'"):
        RerunRecording("test", path=tmp_path / "r.rrd")
    monkeypatch.delitem(sys.modules, "rerun")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    with pytest.raises(RerunError, match="no screen here.*--record FILE.rrd"):
        RerunRecording("test", display=True)
