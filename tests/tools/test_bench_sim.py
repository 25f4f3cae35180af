"""tools/bench_sim.py (the simulator's speed and expert tables in vlash/sim/README.md) in a smoke mode."""

from __future__ import annotations

import re

import pytest

from tests.tools.tool_loader import load_tool

pytestmark = pytest.mark.sim


def test_speed_and_success_tables(capsys):
    load_tool("bench_sim").main(["--seeds", "2", "--delays", "0", "4", "--tasks", "reach", "--steps", "60",
                                 "--image-size", "32"])  # fmt: skip
    out = capsys.readouterr().out
    assert re.search(r"^render 32px: [\d.]+ ms/frame", out, re.M)
    assert re.search(r"^reach +env.step +\d+/s, expert_action +\d+/s, reset +[\d.]+ ms$", out, re.M)
    assert re.search(r"^reach +(0|1)\.\d\d (0|1)\.\d\d$", out, re.M)  # success at d = 0 and d = 4


def test_interface_table(capsys):
    load_tool("bench_sim").main(["--interface-table", "hold", "--seeds", "1", "--loads", "0"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.split(" ")[0] in ("position", "velocity", "ee_delta")]
    assert len(rows) == 3 and all(re.search(r"[01]\.\d\d / [01]\.\d\d", row) for row in rows), lines
