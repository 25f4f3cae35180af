"""tools/bench_serving_overhead.py in its smoke mode: the shipped tiny policy in process and through `vlash serve` on
loopback, two timed requests; the JSON has both sides and the server's breakdown. Nothing here depends on speed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT, load_tool

TOOL = [sys.executable, "tools/bench_serving_overhead.py"]


@pytest.mark.slow
def test_two_requests_in_process_and_served_with_the_servers_breakdown(tmp_path):
    out = tmp_path / "overhead.json"
    args = ["--policy", "pi05-tiny-sim", "--threads", "1", "--requests", "2", "--warmup", "1", "--json", str(out)]
    run = subprocess.run([*TOOL, *args], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["policy"] == "pi05-tiny-sim" and [row["threads"] for row in doc["rows"]] == [1]
    row = doc["rows"][0]
    for side in ("in_process", "served"):
        assert 0 < row[side]["p50"] <= row[side]["p99"], row
    parts = row["server_breakdown_p50"]
    assert set(parts) == {"queue_ms", "preprocess_ms", "prefill_ms", "postprocess_ms", "server_ms", "steps_ms"}
    assert 0 < parts["prefill_ms"] + parts["steps_ms"] <= parts["server_ms"], parts
    assert "threads 1 server breakdown (p50): queue_ms " in run.stdout
    assert "threads 1: 3/3" in run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "0"], "argument --requests: expected an integer >= 1, got 0"),
        (["--threads", "0"], "argument --threads: expected an integer >= 1, got 0"),
        (["--warmup", "-1"], "argument --warmup: expected an integer >= 0, got -1"),
    ],
)
def test_bad_arguments_are_refused_with_one_line(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        load_tool("bench_serving_overhead").main(args)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


def test_json_must_not_be_a_directory(capsys, tmp_path):
    with pytest.raises(SystemExit):
        load_tool("bench_serving_overhead").main(["--json", str(tmp_path)])
    assert "is a directory; give a file name" in capsys.readouterr().err


def test_an_unknown_policy_is_one_line_and_exit_1(capsys):
    assert load_tool("bench_serving_overhead").main(["--policy", "no-such-policy", "--requests", "1"]) == 1
    assert capsys.readouterr().err.startswith("bench_serving_overhead: no shipped policy 'no-such-policy'")
