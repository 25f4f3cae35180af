"""tools/plot_interfaces.py on the shipped results: one panel per result, written as a PNG outside the tree."""

from __future__ import annotations

import struct

import pytest

from tests.tools.tool_loader import ROOT, load_tool

pytestmark = pytest.mark.sim  # matplotlib is in the sim extra
REPORT = ROOT / "docs" / "eval" / "report"
RESULTS = [str(REPORT / "oracle-hold.json.gz"), str(REPORT / "oracle-velocity-load-hold.json.gz")]


def test_two_results_make_a_two_panel_png(capsys, tmp_path):
    out = tmp_path / "interfaces.png"
    args = [*RESULTS, "--titles", "hold: positions", "hold: velocities, load 0.3", "--out", str(out)]
    assert load_tool("plot_interfaces").main(args) == 0
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (2 * 4 * 110, int(3.6 * 110))  # figsize 4 in per panel x 3.6 in, 110 dpi
    assert capsys.readouterr().out == f"wrote {out}\n"


def test_one_title_per_result(capsys, tmp_path):
    with pytest.raises(SystemExit):
        load_tool("plot_interfaces").main([*RESULTS, "--titles", "only one", "--out", str(tmp_path / "x.png")])
    assert "2 results but 1 titles" in capsys.readouterr().err


def test_a_cell_at_100_percent_plots(tmp_path):
    # the oracle at s = 5 solves every episode at d = 0: its Wilson upper bound is 0.9999999999999999, not 1.0
    oracle = str(REPORT / "oracle-velocity-observable-s5-intercept.json.gz")
    out = tmp_path / "oracle.png"
    assert load_tool("plot_interfaces").main([oracle, "--titles", "oracle, s = 5", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
