"""tools/bench_recording.py in a smoke run: every sink ticks, the table has a row each, the JSON matches it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT


def test_a_smoke_run_times_every_sink(tmp_path):
    pytest.importorskip("rerun")
    pytest.importorskip("pyarrow")
    out = tmp_path / "rec.json"
    run = subprocess.run([sys.executable, "tools/bench_recording.py", "--rounds", "1", "--ticks", "6", "--rate-hz",
                          "60", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["sink"] for r in rows] == ["none", "trace (JSON Lines)", "rerun --record", "dataset --record-dataset"]
    assert all(r["ticks"] == 6 and 0 <= r["tick_p50_ms"] <= r["tick_p99_ms"] for r in rows)
    assert rows[2]["inline_p50_ms"] > 0 and rows[3]["inline_p50_ms"] > 0 and rows[0]["inline_p50_ms"] is None
    assert run.stdout.count("\n") == 6 and "| rerun --record |" in run.stdout
