"""robot_io.run_trace: the ring of recent ticks, and the files that get every tick and chunk as the run goes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from robot_io.executors import ChunkRecord
from robot_io.run_trace import JsonLinesTrace, JsonReport, TickWindow


def row(step: int, command=(1.0, 2.0)) -> dict:
    return dict(t=step / 30, step=step, state=np.array([step, -step], np.float32), command=command, held=step % 2 == 0,
                chunk=step // 5, index=step % 5, tick_ms=0.5, reset=step == 7)  # fmt: skip


def test_the_tick_window_keeps_the_most_recent_ticks_oldest_first():
    window = TickWindow(4, state_dim=2, action_dim=2)
    for step in range(10):
        window.append(**row(step, command=None if step == 8 else np.array([step, step], np.float32)))
    arrays = window.arrays()
    assert window.total == 10 and arrays["step"].tolist() == [6, 7, 8, 9]
    assert arrays["reset"].tolist() == [False, True, False, False] and np.isnan(arrays["command"][2]).all()
    assert arrays["state"][:, 1].tolist() == [-6, -7, -8, -9]
    empty = TickWindow(0, 2, 2)
    empty.append(**row(0))
    assert empty.total == 1 and all(len(a) == 0 for a in empty.arrays().values())


def test_json_lines_and_the_json_report_are_valid_json_with_nan_as_null(tmp_path):
    record = ChunkRecord(3, "vlash", 10, 2, 12, 0, latency_ms=float("nan"), timing_ms={"total_ms": 41.25},
                         actions=np.ones((4, 2), np.float32), final=np.ones(4, bool), rows=4)  # fmt: skip
    with JsonLinesTrace(tmp_path / "t.jsonl") as lines, JsonReport(tmp_path / "r.json") as report:
        for sink in (lines, report):
            sink.tick(row(1, command=None))
            sink.chunk(record)
            sink.summary({"ticks": 1})
    tick, chunk, summary = (json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines())
    assert tick["command"] is None and tick["state"] == [1.0, -1.0] and chunk["latency_ms"] is None
    assert chunk["timing_ms"] == {"total_ms": 41.25} and summary == {"kind": "summary", "ticks": 1}
    fields = ["chunk_id", "mode", "request_step", "delay_steps", "planned_switch_step", "planned_index",
              "prefix_len", "ready_ms", "latency_ms", "reply_step", "server_ms", "switch_step", "switch_index",
              "status", "stream_cut", "timing_ms"]  # fmt: skip
    assert list(chunk) == ["kind", *fields]  # the record's fields, never the chunk itself
    chunk.pop("kind")
    assert json.loads((tmp_path / "r.json").read_text()) == {"chunks": [chunk], "summary": {"ticks": 1}}


def test_a_report_closed_without_a_summary_still_parses(tmp_path):
    with JsonReport(tmp_path / "r.json"):
        pass
    assert json.loads((tmp_path / "r.json").read_text()) == {"chunks": [], "summary": None}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_stops_the_trace_not_the_run(caplog):
    trace = JsonLinesTrace("/dev/full")
    for step in range(2000):  # more than one buffer: the writes themselves fail
        trace.tick(row(step))
    trace.close()
    assert isinstance(trace.error, OSError) and "writing stopped" in caplog.text
