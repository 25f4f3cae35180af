"""tools/bench_stalls.py --quick: a live `vlash serve`, one robot alone and beside each hostile client, a table and the
JSON. Nothing here depends on how fast the machine is: only that every cell ran, the robot got chunks alone, and each
hostile client sent frames the server answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT, load_tool

pytestmark = pytest.mark.slow


def test_quick_run_measures_the_robot_beside_every_hostile_client(tmp_path):
    out = tmp_path / "stalls.json"
    run = subprocess.run(
        [sys.executable, "tools/bench_stalls.py", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| beside | robot chunks (of its requests) |" in run.stdout and "load average" in run.stdout, run.stdout
    doc = json.loads(out.read_text())
    rows = {row["scenario"]: row for row in doc["rows"]}
    assert set(rows) == {"alone", "malformed-headers", "websocket-flood", "openpi-bombs"}
    assert rows["alone"]["kept"] > 0 and rows["alone"]["p50_ms"] > 0, rows["alone"]
    for kind in ("malformed-headers", "websocket-flood", "openpi-bombs"):
        assert rows[kind]["sent"] > 0 and rows[kind]["answered"] > 0, (rows[kind], run.stderr[-2000:])
    assert rows["openpi-bombs"]["refused"] == rows["openpi-bombs"]["answered"], "every bomb is refused"
    assert all(cell["latencies_ms"] or cell["lost"] for cell in doc["cells"]), "every cell sent requests"


def test_a_hostile_process_nices_itself_and_prints_its_counts_on_sigterm():
    """The child sets its own niceness (no preexec_fn in the threaded parent) and, stopped, prints its counts: here
    a malformed-headers client of an endpoint nobody serves (its DEALER queues the frames), so nothing is answered."""
    stalls = load_tool("bench_stalls")
    hostile = sys.modules["hostile_clients"]  # the module bench_stalls imported
    endpoint = f"tcp://127.0.0.1:{stalls.free_port()}"  # nothing listens there
    tool = str(ROOT / "tools" / "bench_stalls.py")
    running = hostile.start_hostile("malformed-headers", endpoint, "ws://127.0.0.1:9", tool, nice=7)
    try:  # 7 above this process's niceness, at most 19
        assert os.getpriority(os.PRIO_PROCESS, running.proc.pid) == min(19, os.nice(0) + 7)
    finally:
        counts = hostile.stop_hostile(running)
    assert counts == {"sent": hostile.IN_FLIGHT, "answered": 0, "refused": 0}, counts
