"""tools/bench_transport.py in a smoke run: every row (echo servers, a real PolicyServer over an echo runtime, the
openpi endpoint) on loopback tcp, a few rounds each. Nothing here depends on how fast the machine is: only that
every row answered every round and its summary is consistent."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT, load_tool

pytestmark = pytest.mark.slow
ROUNDS = 3


def test_every_row_answers_every_round_on_loopback():
    pytest.importorskip("websockets")
    tool = load_tool("bench_transport")
    run = subprocess.run(
        [sys.executable, "tools/bench_transport.py", "--rounds", str(ROUNDS), "--warmup", "1", "--transports", "tcp"]
        + ["--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {(r["path"], r["transport"]): r for r in json.loads(run.stdout)["rows"]}
    assert set(rows) == {*((path, "tcp") for path in tool.PATHS), ("codec only", "-")}
    for key, row in rows.items():
        assert row["rounds"] == ROUNDS, key
        assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"], key
        assert ("p50_ratio" in row) == (key[1] == "tcp"), key  # ratios to raw zmq, for every row with a transport
    assert rows[(tool.FLOOR, "tcp")]["p50_ratio"] == 1.0
