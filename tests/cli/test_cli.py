"""The `vlash` command line: info on the full-size preset, bench on the tiny one, clean errors."""

from __future__ import annotations

import json

import pytest

from vlash.cli.main import main


def test_info_reports_full_size_parameter_count(capsys):
    assert main(["info", "--policy", "pi05", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"]["total"] == 3_353_433_872
    # with the two unused lm_head tensors it is exactly LeRobot's pi0.5 state dict
    assert info["parameters"]["total"] + info["not_built"]["lm_heads (unused by an action policy)"] == 4_143_404_816
    assert info["config"]["vlm"]["width"] == 2048 and info["prefix_tokens"] == 3 * 256 + 200


def test_info_table_lists_components(capsys):
    assert main(["info", "--policy", "pi05-small"]) == 0
    out = capsys.readouterr().out
    assert "action expert" in out and "vision tower" in out


@pytest.mark.parametrize("schedule", ["constant", "horizon-aware"])
def test_bench_json_has_medians_and_p99(capsys, schedule):
    args = [
        "bench",
        "--policy",
        "pi05-tiny",
        "--schedule",
        schedule,
        "--steps",
        "4",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--json",
    ]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    summary = report["summary"]
    assert set(summary) == {"prefill_ms", "step_ms", "ttfa_ms", "chunk_ms"}
    assert summary["step_ms"]["n"] == 3 * 4
    assert all(row["median"] > 0 and row["p99"] >= row["median"] for row in summary.values())
    ttfa, chunk = summary["ttfa_ms"]["median"], summary["chunk_ms"]["median"]
    if schedule == "constant":
        assert ttfa == pytest.approx(chunk, rel=0.05)  # nothing is final before the last step
    else:
        assert ttfa < chunk  # the first action is final after one step


def test_unknown_policy_is_a_clean_error(capsys):
    assert main(["info", "--policy", "pi07"]) == 2
    err = capsys.readouterr().err
    assert "'pi07' is not a shipped policy" in err and "pi05-tiny" in err and err.count("\n") == 1


def test_bench_rejects_missing_cuda(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert main(["bench", "--policy", "pi05-tiny", "--device", "cuda", "--iters", "1"]) == 2
    assert "--device cuda needs a CUDA GPU" in capsys.readouterr().err
