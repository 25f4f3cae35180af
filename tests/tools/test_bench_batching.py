"""tools/bench_batching.py --quick: robots against an in-process server in both modes, a table and the JSON.
Nothing here depends on how fast the machine is: only that every cell served chunks and measured latencies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT

pytestmark = pytest.mark.slow


def test_quick_run_writes_every_cell_with_chunks_and_latencies(tmp_path):
    out = tmp_path / "batching.json"
    run = subprocess.run(
        [sys.executable, "tools/bench_batching.py", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    modes = ("batched", "one-at-a-time")
    cells = {(c["policy"], c["robots"], c["mode"]): c for c in doc["cells"]}
    assert set(cells) == {("pi05-tiny", n, mode) for n in (1, 2) for mode in modes}
    for key, cell in cells.items():
        assert cell["chunks"] > 0 and cell["seconds"] == 1.5, key
        assert cell["errors"] == 0 and cell["due"] >= cell["missed"] >= 0, key
        assert cell["latencies_ms"] and all(x > 0 for x in cell["latencies_ms"]), key
        assert cell["max_batch"] == (8 if key[2] == "batched" else 1), key
    for row in doc["rows"]:
        assert row["chunks_per_s"] > 0 and 0 < row["latency_p50_ms"] <= row["latency_p99_ms"], row
        assert row["batch_size_mean"] >= 1 and row["queue_wait_p50_ms"] is not None, row
    assert [(r["policy"], r["robots"]) for r in doc["ratios"]] == [("pi05-tiny", 1), ("pi05-tiny", 2)]
    assert all(r["chunks_per_s"] > 0 and r["p99"] > 0 for r in doc["ratios"])
    assert doc["target"]["holds"] is None  # pi05-small at N = 4 is not in a quick run
    assert "| pi05-tiny | 2 | one-at-a-time | 1 |" in run.stdout and "not measured in this run" in run.stdout
    assert "bench_batching: 4/4 pi05-tiny N=2 one-at-a-time round 1" in run.stderr  # progress lines without a tty
