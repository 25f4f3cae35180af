"""tools/gpu_acceptance.py on its CPU smoke path (pi05-tiny, 1 and 2 cameras): real timings against the roofline
floor, fidelity vs torch fp32 on the same weights (exactly equal for torch fp32 itself, close for bf16), a variant
that fails or is missing recorded as a row without stopping the run, a second call resuming the first, and the
refusals (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from tests.tools.tool_loader import ROOT, load_tool

SMOKE = ["--device", "cpu", "--policy", "pi05-tiny", "--skip-tests", "--skip-batch", "--iters", "2", "--warmup", "1"]
SMOKE += ["--threads", "1"]  # beside busy cores, 2 threads per row ran 70x slower
VARIANTS = ["torch-fp32", "torch-bf16", "onnxruntime-fp32"]
FAILING = ["torch-bf16-graphs", "tensorrt-fp16"]  # CUDA graphs on the CPU: an error; TensorRT on the CPU: unavailable


def acceptance(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "tools/gpu_acceptance.py", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The smoke run, then a second call with two more variants: it keeps the first call's rows, runs only the new."""
    out = tmp_path_factory.mktemp("acceptance")
    first = acceptance(*SMOKE, "--variants", *VARIANTS, "--out", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    before = json.loads((out / "acceptance.json").read_text())
    second = acceptance(*SMOKE, "--variants", *VARIANTS, *FAILING, "--out", str(out))
    assert second.returncode == 0, second.stderr[-3000:]
    return before, json.loads((out / "acceptance.json").read_text()), (out / "acceptance.md").read_text(), second


def rows_of(doc: dict) -> dict:
    return {(r["cameras"], r["variant"]): r for r in doc["rows"]}


def test_timings_are_measured_against_the_floor(runs):
    before, _, _, _ = runs
    assert before["run"]["profile"] == "cpu" and before["complete"] is True
    rows = rows_of(before)
    assert sorted(rows) == sorted((c, v) for c in (1, 2) for v in VARIANTS)
    for row in rows.values():
        assert row["status"] == "ok" and row["error"] is None, row
        summary = row["bench"]["summary"]
        assert summary["chunk_ms"]["n"] == 2 and summary["step_ms"]["n"] == 20  # 2 chunks of 10 steps
        for metric in ("prefill_ms", "step_ms", "ttfa_ms", "chunk_ms"):
            m = summary[metric]
            assert 0 < m["median"] <= m["p99"] and m["floor"] > 0 and m["vs_floor"] == m["median"] / m["floor"]
        assert summary["chunk_ms"]["median"] > summary["prefill_ms"]["median"]
        assert row["bench"]["peak_memory_mb"] > 0
    two, one = rows[(2, "torch-fp32")]["bench"]["summary"], rows[(1, "torch-fp32")]["bench"]["summary"]
    assert two["prefill_ms"]["floor"] > one["prefill_ms"]["floor"]  # the second camera's tokens cost work


def test_fidelity_is_against_torch_fp32_on_the_same_weights(runs):
    rows = rows_of(runs[0])
    for cameras in (1, 2):
        same = rows[(cameras, "torch-fp32")]["fidelity"]
        assert same["max_abs_error"] == 0.0 and same["cosine_min"] == pytest.approx(1.0, abs=1e-12)
        assert same["observations"] == 4 and same["gate"] == "pass" and same["reasons"] == []
        bf16 = rows[(cameras, "torch-bf16")]["fidelity"]
        assert 0 < bf16["max_abs_error"] < 0.1 and 0.999 < bf16["cosine_min"] < 1.0 and bf16["gate"] == "pass"
        onnx = rows[(cameras, "onnxruntime-fp32")]["fidelity"]  # an export of the same CPU weights
        assert onnx["max_abs_error"] < 1e-4 and onnx["gate"] == "pass"


def test_a_failing_variant_is_a_row_and_the_second_call_resumes(runs):
    before, after, _, second = runs
    rows, earlier = rows_of(after), rows_of(before)
    for key, row in earlier.items():
        assert rows[key]["bench"] == row["bench"]  # kept, not measured again
    assert sorted(rows) == sorted((c, v) for c in (1, 2) for v in VARIANTS + FAILING)
    assert after["complete"] is True and len(after["calls"]) == 2
    for cameras in (1, 2):
        graphs, trt = rows[(cameras, "torch-bf16-graphs")], rows[(cameras, "tensorrt-fp16")]
        assert graphs["status"] == "error" and graphs["phase"] == "build" and graphs["bench"] is None
        assert graphs["error"]["type"] == "ConfigError" and "CUDA device" in graphs["error"]["message"]
        assert "Traceback" in graphs["error"]["traceback"]
        assert trt["status"] == "unavailable" and "CUDA GPU" in trt["error"]["message"]
    assert second.stderr.count("building") == 4  # only the 4 new rows ran


def test_markdown_has_a_table_per_camera_count(runs):
    _, after, md, _ = runs
    assert "# GPU acceptance: pi05-tiny on the CPU, 10 steps, constant" in md
    assert "Profile cpu" in md and f"torch {torch.__version__}" in md
    one, two = md.split("## 1 camera\n")[1].split("## 2 cameras\n")
    for section, cameras in ((one, 1), (two, 2)):
        table = [line for line in section.splitlines() if line.startswith("| ") and "p50 / p99 |" not in line]
        assert [line.split(" | ")[0] for line in table] == [f"| {v}" for v in VARIANTS + FAILING]
        row = rows_of(after)[(cameras, "torch-bf16")]
        chunk = row["bench"]["summary"]["chunk_ms"]
        line = next(line for line in table if line.startswith("| torch-bf16 |"))
        assert f"{chunk['median']:.2f} / {chunk['p99']:.2f} ({chunk['vs_floor']:.1f}x)" in line
        assert f"| {row['fidelity']['max_abs_error']:.3g} | pass | ok |" in line
        assert "| torch-bf16-graphs | bf16 | - |" in section and "| error (build) |" in section
        assert "- torch-bf16-graphs: error: ConfigError: cuda_graphs needs the model on a CUDA device" in section
        assert "- tensorrt-fp16: unavailable: EngineUnavailable:" in section
    assert md.rstrip().endswith("skipped")  # the batch stage, skipped


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_a_gpu_exits_2_with_one_line(tmp_path):
    run = acceptance("--device", "cuda", "--skip-tests", "--skip-batch", "--out", str(tmp_path))
    assert run.returncode == 2 and run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert "--device cuda, but torch" in line and "sees no CUDA GPU" in line
    assert not (tmp_path / "acceptance.json").exists()


def test_bad_arguments_exit_2(tmp_path):
    run = acceptance("--device", "cpu", "--variants", "torch-fp64", "--out", str(tmp_path))
    assert run.returncode == 2 and "unknown variants ['torch-fp64']" in run.stderr
    run = acceptance("--device", "cpu", "--profile", "h100", "--out", str(tmp_path))
    assert run.returncode == 2 and "profile 'h100' is for device cuda, not cpu" in run.stderr
    run = acceptance("--device", "cpu", "--profile", "tpu-v9", "--out", str(tmp_path))
    assert run.returncode == 2 and "unknown device profile 'tpu-v9'" in run.stderr.strip().splitlines()[-1]


def test_a_spent_budget_leaves_the_work_to_the_next_call(tmp_path):
    run = acceptance(*SMOKE, "--variants", "torch-fp32", "--budget-s", "1", "--out", str(tmp_path))
    assert run.returncode == 3, run.stderr[-2000:]
    doc = json.loads((tmp_path / "acceptance.json").read_text())
    assert doc["rows"] == [] and doc["complete"] is False and "2 left" in run.stderr
    doc["rows"] = [{"cameras": 1, "variant": "torch-fp32", "engine": "torch", "precision": "fp32", "status": "running"}]
    (tmp_path / "acceptance.json").write_text(json.dumps(doc))  # a call that was killed during its first row
    run = acceptance(*SMOKE, "--variants", "torch-fp32", "--budget-s", "1", "--out", str(tmp_path))
    assert run.returncode == 3 and "1 left" in run.stderr and "resuming" in run.stderr
    (row,) = json.loads((tmp_path / "acceptance.json").read_text())["rows"]
    assert row["status"] == "interrupted" and "--retry" in row["error"]["message"]
    assert "- torch-fp32: interrupted: interrupted: the call stopped" in (tmp_path / "acceptance.md").read_text()


def test_profile_from_the_gpu_name_and_wheels():
    rows = load_tool("gpu_acceptance_rows")
    assert rows.choose_profile("cuda", "NVIDIA H100 80GB HBM3")[0] == "h100"
    assert rows.choose_profile("cuda", "NVIDIA GeForce RTX 4090")[0] == "rtx-4090"
    name, why = rows.choose_profile("cuda", "NVIDIA H200")
    assert name == "h100" and "no profile matches GPU 'NVIDIA H200'" in why
    assert rows.choose_profile("cpu", "")[0] == "cpu"
    assert "no *.whl in" in rows.install_wheels(ROOT / "configs")["error"]
