"""tools/eval_compare.py on the shipped results: the q = 2 / q = 1 row of docs/EVALUATION.md, paired by seed."""

from __future__ import annotations

import re

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
