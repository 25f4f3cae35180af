"""tools/eval_compare.py on the shipped results: the q = 2 / q = 1 row of docs/EVALUATION.md, paired by seed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.tools.tool_loader import ROOT, load_tool

REPORT = ROOT / "docs" / "eval" / "report"
Q2, Q1 = str(REPORT / "learned-q2-reach.json.gz"), str(REPORT / "learned-reach.json.gz")


def test_the_learned_vlash_row_of_evaluation_md(capsys):
    assert load_tool("eval_compare").main([Q2, Q1, "--mode", "vlash", "--delay", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "vlash d=4, 50 paired seeds 100000-100049"
    ratio = re.fullmatch(r"completion_s: \S+ / \S+ = (\d\.\d+) \[95% CI (\d\.\d+)-(\d\.\d+)\]", out[1])
    assert ratio, out[1]
    low, mid, high = (float(ratio.group(i)) for i in (2, 1, 3))
    assert low < mid < high
    first, second = (re.fullmatch(r"success \S+: (\d+)% \[\d+-\d+\]", line).group(1) for line in out[2:])
    doc = (ROOT / "docs" / "EVALUATION.md").read_text().splitlines()
    row = next(line for line in doc if line.startswith("| learned (augmented), vlash | "))
    assert row.startswith(f"| learned (augmented), vlash | {mid:.2f} [{low:.2f}-{high:.2f}]")
    assert row.endswith(f"| {first} vs {second} |")


def test_a_cell_neither_file_holds_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        load_tool("eval_compare").main([Q2, Q1, "--mode", "sync", "--delay", "4"])
    assert "learned-q2-reach.json.gz: no episodes of mode 'sync' at delay 4" in str(exit_.value)


def test_two_cells_of_one_file_pair_by_seed(capsys):
    grid = str(REPORT / "learned-velocity-observable-s5-intercept.json.gz")
    tool = load_tool("eval_compare")
    args = [grid, grid, "--mode", "vlash", "--delay", "4", "--second-mode", "naive", "--metric", "success"]
    assert tool.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "vlash d=4 against naive d=4, 100 paired seeds 100000-100099"
    vlash, naive = (tool.cell_episodes(Path(grid), mode, 4) for mode in ("vlash", "naive"))
    wins = [sum(e["success"] for e in cell.values()) for cell in (vlash, naive)]
    assert wins[0] != wins[1]  # two cells, not one read twice
    assert out[1].startswith(f"success: vlash d=4 / naive d=4 = {wins[0] / wins[1]:.3f} [95% CI ")
    assert out[2].startswith(f"success vlash d=4: {wins[0]}% [")  # 100 episodes: wins are percent
    assert out[3].startswith(f"success naive d=4: {wins[1]}% [")
    doc = (ROOT / "docs" / "EVALUATION.md").read_text()
    assert f"vlash / naive at d = 4, paired: {out[1].split(' = ')[1]}" in doc
