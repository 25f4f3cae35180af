"""tools/bench_stalls.py --quick: a live `vlash serve`, one robot alone and beside each hostile client, a table and the
JSON. Nothing here depends on how fast the machine is: only that every cell ran, the robot got chunks alone, and each
hostile client sent frames the server answered."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT

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
