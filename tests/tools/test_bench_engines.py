"""tools/bench_engines.py in its smoke mode: pi05-tiny, one eager and one quantized variant, one timed chunk each."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT, load_tool

TOOL = [sys.executable, str(ROOT / "tools" / "bench_engines.py")]
CELL = r"\d+\.\d / \d+\.\d \(\d+x floor\)"  # median / p99 (measured / floor)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*TOOL, *args], cwd=ROOT, capture_output=True, text=True, timeout=240)


def test_one_row_per_variant_with_four_metrics_their_floors_and_peak_memory():
    args = ["--policies", "pi05-tiny", "--variants", "torch-fp32", "torch-int8", "--iters", "1", "--warmup", "0"]
    run = _run(*args, "--threads", "1", "--profile-rates")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| pi05-tiny |")]
    assert [row.split(" | ")[1:3] for row in rows] == [["torch-fp32", "fp32"], ["torch-int8", "int8"]]
    for row in rows:
        assert re.fullmatch(rf"\| pi05-tiny \| [\w-]+ \| \w+ \| {CELL} \| {CELL} \| {CELL} \| {CELL} \| \d+ \|", row)
    floors = [line for line in run.stdout.splitlines() if line.startswith("<!-- roofline pi05-tiny")]
    assert [line.split()[3] for line in floors] == ["fp32", "int8"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--iters", "0"], "argument --iters: expected an integer >= 1, got 0"),
        (["--warmup", "-1"], "argument --warmup: expected an integer >= 0, got -1"),
        (["--variants", "torch-int3"], "invalid choice: 'torch-int3'"),
        (["--profile", "no-such-profile"], "--profile no-such-profile: unknown device profile"),
    ],
)
def test_bad_arguments_are_refused_with_one_line(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        load_tool("bench_engines").main(args)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]
