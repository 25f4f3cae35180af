"""tools/bench_shared_time.py runs end to end (pi05-tiny, torch and onnxruntime, a few rounds) and prints one row per
engine; what it measures is in docs/BENCHMARKS.md, never asserted here."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.tools.tool_loader import ROOT

ROW = re.compile(r"^\| (\w+) \| ([\d.]+) / ([\d.]+) \| ([\d.]+) / ([\d.]+) \| ([\d.]+) \(([\d.]+)-([\d.]+)\) \|$")


def test_one_row_per_engine_with_medians_p99s_and_the_ratio():
    command = [sys.executable, str(ROOT / "tools" / "bench_shared_time.py"), "--policy", "pi05-tiny", "--threads", "1"]
    out = subprocess.run([*command, "--rounds", "4"], capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [m.groups() for m in map(ROW.match, out.splitlines()) if m]
    assert [r[0] for r in rows] == ["torch", "onnxruntime"]
    for _, p50, p99, shared_p50, shared_p99, ratio, low, high in rows:
        assert 0 < float(p50) <= float(p99) and 0 < float(shared_p50) <= float(shared_p99)
        assert float(low) <= float(ratio) <= float(high)
