"""tools/bench_vs_openpi.py: argument checks, the agreement gate, the re-randomization rule, the interleaving, the
table and JSON, the vlash-only mode on pi05-tiny, and (with flax and an openpi checkout named by VLASH_OPENPI) the
tiny config through openpi's JAX and vlash. Nothing here depends on how fast the machine is."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.tools.tool_loader import ROOT, load_tool

tool = load_tool("bench_vs_openpi")


def _run(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    command = [sys.executable, "tools/bench_vs_openpi.py", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "0"], "--rounds: "),
        (["--threads", "-1"], "--threads: "),
        (["--warmup", "-1"], "--warmup: "),
        (["--tolerance", "0"], "--tolerance must be > 0"),
        (["--tolerance", "nan"], "--tolerance must be > 0"),
        (["--engines", "torch", "torch"], "--engines names one twice"),
        (["--engines", "tensorrt"], "invalid choice: 'tensorrt'"),
        (["--policy", "no-such-policy"], "--policy no-such-policy: "),
    ],
)
def test_bad_arguments_are_refused(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        tool.parse_args(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_openpi_must_be_a_checkout_and_json_not_a_directory(tmp_path, capsys):
    with pytest.raises(SystemExit):
        tool.parse_args(["--openpi", str(tmp_path)])
    assert f"--openpi {tmp_path} is not an openpi checkout (no src/openpi/models/pi0.py)" in capsys.readouterr().err
    (tmp_path / "src" / "openpi" / "models").mkdir(parents=True)
    (tmp_path / "src" / "openpi" / "models" / "pi0.py").touch()
    assert tool.parse_args(["--openpi", str(tmp_path)]).openpi == tmp_path
    with pytest.raises(SystemExit):
        tool.parse_args(["--json", str(tmp_path)])
    assert f"--json {tmp_path} is a directory" in capsys.readouterr().err


def test_the_issue_config_is_pi05_small_with_one_camera_and_prompt_64():
    args = tool.parse_args(["--policy", "pi05-small", "--cameras", "1", "--prompt-len", "64"])
    config = args.config
    assert (config.name, config.num_cameras, config.max_token_len) == ("pi05-small", 1, 64)
    assert (args.engines, args.rounds, args.steps, args.tolerance) == (list(tool.ENGINES), 10, 10, 1e-3)


def test_agreement_returns_every_max_abs_diff_within_tolerance():
    ref = np.zeros((1, 4, 2), np.float32)
    close = ref.copy()
    close[0, 3, 1] = -5e-4
    edge = np.full((1, 4, 2), 1e-3)  # float64: exactly the tolerance, which passes
    diffs = tool.agreement({"openpi-jax": ref, "torch": close, "onnxruntime": edge}, "openpi-jax", 1e-3)
    assert diffs["openpi-jax"] == 0.0 and diffs["torch"] == pytest.approx(5e-4)
    assert diffs["onnxruntime"] == 1e-3


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.full((1, 4, 2), 2e-3, np.float32), "torch max|diff| 0.002"),
        (np.full((1, 4, 2), np.nan, np.float32), "torch max|diff| nan"),
        (np.zeros((1, 4, 3), np.float32), "torch returned actions of shape (1, 4, 3), openpi-jax (1, 4, 2)"),
    ],
)
def test_agreement_refuses_far_nan_or_misshapen_actions(bad, message):
    ref = np.zeros((1, 4, 2), np.float32)
    with pytest.raises(tool.Disagreement) as exc_info:
        tool.agreement({"openpi-jax": ref, "torch-compile": ref, "torch": bad}, "openpi-jax", 1e-3)
    assert message in str(exc_info.value) and "torch-compile" not in str(exc_info.value)


def test_rerandomize_replaces_constants_perturbs_norms_and_keeps_random_kernels():
    rng = np.random.default_rng(0)
    kernel = rng.standard_normal((2, 64, 96)).astype(np.float32)
    params = {
        "PaliGemma/llm/layers/pre_ffw_norm_1/Dense_0/kernel": np.zeros((2, 64, 192), np.float32),
        "PaliGemma/llm/layers/pre_ffw_norm_1/Dense_0/bias": np.zeros((2, 192), np.float32),
        "PaliGemma/llm/final_norm/scale": np.zeros(64, np.float32),
        "PaliGemma/llm/layers/mlp/linear": kernel,
    }
    out = tool.rerandomize(params, seed=1)
    assert out["PaliGemma/llm/layers/mlp/linear"] is not kernel
    np.testing.assert_array_equal(out["PaliGemma/llm/layers/mlp/linear"], kernel)
    dense = out["PaliGemma/llm/layers/pre_ffw_norm_1/Dense_0/kernel"]
    assert dense.dtype == np.float32 and abs(dense.std() * math.sqrt(64) - 1) < 0.05  # N(0, 1) / sqrt(fan_in)
    for name in ("PaliGemma/llm/layers/pre_ffw_norm_1/Dense_0/bias", "PaliGemma/llm/final_norm/scale"):
        assert 0.05 < out[name].std() < 0.15 and np.all(out[name] != 0), name  # init + 0.1 N(0, 1)
    assert all(a.flags.writeable for a in out.values())
    again = tool.rerandomize(params, seed=1)  # seeded: the same numbers every run
    assert all(np.array_equal(again[k], out[k]) for k in out)


def test_interleaved_rotates_the_order_every_round_after_the_warmup():
    calls = []
    chunks = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    times = tool.interleaved(chunks, rounds=4, warmup=1)
    assert calls == list("abcabcbcacababc")
    assert {k: len(v) for k, v in times.items()} == {"a": 4, "b": 4, "c": 4}
    assert all(t >= 0 for v in times.values() for t in v)


def test_rows_table_and_json(tmp_path):
    times = {"openpi-jax": [10.0, 20.0, 10.0], "torch": [20.0, 20.0, 30.0]}
    rows = tool.summarize(times, "openpi-jax", floor_ms=5.0, diffs={"openpi-jax": 0.0, "torch": 3.5e-5})
    ref, torch_row = rows
    assert ref["vs_reference"] == {"median": 1.0, "ci95": [1.0, 1.0], "min": 1.0, "max": 1.0}
    assert torch_row["chunk_p50_ms"] == 20.0 and torch_row["vs_floor"] == 4.0 and torch_row["rounds"] == 3
    assert torch_row["vs_reference"]["median"] == 2.0  # per-round ratios 2, 1, 3
    assert (torch_row["vs_reference"]["min"], torch_row["vs_reference"]["max"]) == (1.0, 3.0)
    lo, hi = torch_row["vs_reference"]["ci95"]
    assert 1.0 <= lo <= 2.0 <= hi <= 3.0
    assert torch_row["chunk_p99_ms"] == pytest.approx(np.percentile([20.0, 20.0, 30.0], 99))
    table = tool.markdown(rows, "openpi-jax", 5.0)
    assert "| engine | chunk p50 ms | chunk p99 ms | / openpi-jax (median [95% CI]) | / floor | max abs diff |" in table
    assert f"| torch | 20.0 | {torch_row['chunk_p99_ms']:.1f} | 2.00x [{lo:.2f}, {hi:.2f}] | 4.0x | 3.5e-05 |" in table
    out = tmp_path / "sub" / "rows.json"
    tool.write_json(out, {"rows": rows})
    assert json.loads(out.read_text()) == {"rows": rows}
    assert [p.name for p in out.parent.iterdir()] == ["rows.json"]  # no temp file left behind


@pytest.mark.slow
def test_vlash_only_mode_on_pi05_tiny(tmp_path):
    out = tmp_path / "tiny.json"
    run = _run("--policy", "pi05-tiny", "--rounds", "2", "--warmup", "0", "--profile-rates", "--json", str(out))
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["reference"] == "torch" and doc["openpi"] is None and doc["floor_chunk_ms"] > 0
    assert [r["engine"] for r in doc["rows"]] == list(tool.ENGINES)
    for row in doc["rows"]:
        assert row["rounds"] == 2 and 0 < row["chunk_p50_ms"] <= row["chunk_p99_ms"], row
        assert row["max_abs_diff"] < 1e-3 and row["vs_floor"] > 0, row
    assert doc["rows"][0]["max_abs_diff"] == 0.0 and doc["rows"][0]["vs_reference"]["median"] == 1.0
    assert "| torch-compile | " in run.stdout and "/ torch (median [95% CI])" in run.stdout
    assert "bench_vs_openpi: round 2/2: torch " in run.stderr


@pytest.mark.slow
def test_a_disagreement_exits_1_without_timing():
    run = _run("--policy", "pi05-tiny", "--engines", "torch", "onnxruntime", "--tolerance", "1e-12", "--rounds", "1")
    assert run.returncode == 1, run.stderr[-3000:]
    assert "actions disagree with torch beyond 1e-12: onnxruntime max|diff| " in run.stderr
    assert run.stdout == "" and "round 1/1" not in run.stderr


def _openpi_checkout() -> Path:
    path = os.environ.get("VLASH_OPENPI")
    if not path:
        pytest.skip("set VLASH_OPENPI to an openpi source checkout to run openpi's JAX pi0.5 beside vlash")
    pytest.importorskip("flax", reason="openpi's model code needs pip install 'vlash[bench-jax]'")
    return Path(path)


@pytest.mark.slow
def test_tiny_config_through_openpi_jax_and_vlash_agrees(tmp_path):
    checkout, out = _openpi_checkout(), tmp_path / "openpi.json"
    args = ["--openpi", str(checkout), "--policy", "pi05-tiny", "--engines", "torch", "--threads", "1"]
    run = _run(*args, "--rounds", "1", "--warmup", "0", "--profile-rates", "--json", str(out), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["reference"] == tool.OPENPI and [r["engine"] for r in doc["rows"]] == [tool.OPENPI, "torch"]
    assert 0 < doc["rows"][1]["max_abs_diff"] < 1e-3  # the same weights, two implementations: close, not bitwise
    assert doc["xla_env"]["NPROC"] == "1"
    assert doc["xla_env"]["XLA_FLAGS"].endswith("--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
