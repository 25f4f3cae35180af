"""tools/bench_fleet.py: without Ray it says so and exits 0; with Ray, a one-robot smoke run against both paths
(vlash serve --openpi-port and the Ray Serve fleet). Nothing here depends on how fast the machine is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT

BLOCK_RAY = (
    "import importlib.abc, runpy, sys\n"
    "class Block(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] == 'ray':\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, Block())\n"
    "sys.argv = ['tools/bench_fleet.py']\n"
    "runpy.run_path('tools/bench_fleet.py', run_name='__main__')\n"
)


@pytest.fixture(scope="module", autouse=True)
def _ray_turn(one_ray_at_a_time):  # tests/conftest.py: this module starts Ray
    yield


def test_without_ray_it_says_so_and_exits_0():
    run = subprocess.run([sys.executable, "-c", BLOCK_RAY], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "skipped: Ray Serve is not installed (pip install 'vlash[fleet]')" in run.stderr and run.stdout == ""


@pytest.mark.slow
def test_one_robot_against_both_paths(tmp_path):
    pytest.importorskip("ray.serve")
    out = tmp_path / "fleet.json"
    args = ["--robots", "1", "--duration-s", "1", "--warmup-s", "0.5", "--rounds", "1", "--out", str(out)]
    run = subprocess.run(
        [sys.executable, "tools/bench_fleet.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=420
    )
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert [(r["robots"], r["path"]) for r in doc["rows"]] == [(1, "vlash openpi endpoint"), (1, "Ray Serve fleet")]
    for row in doc["rows"]:
        assert row["requests"] > 0 and 0 < row["p50_ms"] <= row["p99_ms"], row
    (overhead,) = doc["overhead"]
    assert overhead["robots"] == 1 and overhead["p50_ratio"] > 0 and overhead["p99_ratio"] > 0
    assert "| 1 | Ray Serve fleet |" in run.stdout and "Ray adds at p50 ms" in run.stdout
