"""tools/eval_table.py on the shipped results: its tables are the ones docs/EVALUATION.md shows."""

from __future__ import annotations

import re

import pytest

from tests.tools.tool_loader import ROOT, load_tool

REPORT = ROOT / "docs" / "eval" / "report"
DOC = (ROOT / "docs" / "EVALUATION.md").read_text()


@pytest.mark.parametrize(
    ("result", "args"),
    [
        ("oracle-velocity-load-hold.json.gz", ["--modes", "sync,naive,vlash,faster,ensemble"]),
        ("oracle-reach.json.gz", ["--modes", "sync,naive,vlash,faster", "--jumps"]),
    ],
)
def test_the_table_is_the_one_in_evaluation_md(capsys, result, args):
    assert load_tool("eval_table").main([str(REPORT / result), *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| mode | d = 0 | d = 2 | d = 4 | d = 8 |"
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| " + m for m in args[1].split(",")]
    cell = r"\d+ \[\d+-\d+\] · \d+\.\d\d s" + (r" · \d\.\d\d" if "--jumps" in args else "")
    assert all(re.fullmatch(rf"\| \w+ \| {cell} \| {cell} \| {cell} \| {cell} \|", line) for line in lines[2:])
    assert "\n".join(lines) in DOC


def test_a_missing_result_is_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        load_tool("eval_table").main([str(tmp_path / "none.json")])
    assert exit_.value.code == 2
    assert "none.json: [Errno 2] No such file or directory" in capsys.readouterr().err.splitlines()[-1]
