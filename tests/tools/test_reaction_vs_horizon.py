"""tools/reaction_vs_horizon.py: one sweep per execution horizon through vlash eval's harness; cells a mode cannot
run are skipped with the reason."""

from __future__ import annotations

import argparse
import json

import pytest

from tests.tools.tool_loader import load_tool

pytestmark = pytest.mark.sim


def test_faster_replans_every_step_where_naive_cannot_run(tmp_path):
    tool = load_tool("reaction_vs_horizon")
    modes = ("sync", "naive", "faster")
    args = argparse.Namespace(task="whack", policy="oracle", delay=4, horizons=(1, 10), modes=modes, episodes=1,
                              chunk_length=50, prefill_share=0.15, seed=0, workers=1)  # fmt: skip
    result = tool.sweep(args)
    cells = {(c["mode"], c["execution_horizon"]): c for c in result["cells"]}
    assert set(cells) == {("sync", 1), ("faster", 1), ("sync", 10), ("naive", 10), ("faster", 10)}
    (skipped,) = result["skipped"]
    assert (skipped["mode"], skipped["execution_horizon"]) == ("naive", 1)
    assert "delay 4 > execution horizon 1" in skipped["why"]
    # re-planning every step from streamed rows reacts sooner than sync, which stops for every inference
    assert cells[("faster", 1)]["reaction_mean_s"] < 0.5 * cells[("sync", 1)]["reaction_mean_s"]
    assert cells[("faster", 1)]["missed_steps"] == 0 and cells[("faster", 1)]["n"] == 1
    png = tmp_path / "r.png"
    tool.plot(json.loads(json.dumps(result)), png)
    assert png.stat().st_size > 0
