"""tools/gpu_acceptance.py: the dry run (pi05-tiny on this CPU) exercises every row type for real; a fake worker
shows that a row which hangs or kills its worker is recorded and the rows after it still run; resume, budget and
the refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest
import torch

from tests.tools.tool_loader import ROOT, load_tool


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("acceptance")
    cmd = [sys.executable, "tools/gpu_acceptance.py", "--dry-run", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "acceptance.json").read_text()), (out / "acceptance.md").read_text(), done


def test_the_dry_run_runs_every_row_type(dry_run):
    doc, _, _ = dry_run
    rows = load_tool("gpu_acceptance_rows")
    assert list(doc["rows"]) == list(rows.ROW_IDS)
    assert all(row["status"] == "ok" for row in doc["rows"].values()), {
        k: v.get("error") for k, v in doc["rows"].items()
    }
    for row_id in ("eager-bf16-2cam", "graph-chunk-2cam", "graph-step-1cam", "compile-graph-step-2cam"):
        summary = doc["rows"][row_id]["summary"]
        for metric in ("prefill_ms", "step_ms", "ttfa_ms", "chunk_ms"):
            m = summary[metric]
            assert 0 < m["median"] <= m["p99"] and m["n"] >= 2 and m["vs_floor"] == m["median"] / m["floor"]
    graph = doc["rows"]["graph-chunk-2cam"]
    assert graph["programs"][:2] == ["prefill(B=1)", "span(B=1, steps=10, shared=10, held=False)"]
    assert graph["horizon_aware"]["ttfa_ms"]["median"] < graph["summary"]["ttfa_ms"]["median"]  # first action early
    assert doc["rows"]["compile-graph-step-2cam"]["engine"]["compile"].startswith("default + static programs")


def test_fidelity_batches_fp8_and_tests(dry_run):
    doc, _, _ = dry_run
    variants = doc["rows"]["fidelity-2cam"]["variants"]
    assert sorted(variants) == ["eager", "graph-chunk", "graph-step"]
    for fidelity in variants.values():  # bf16 vs fp32 on the same weights: close, not equal
        assert 0.999 < fidelity["cosine_min"] < 1.0 and 0 < fidelity["max_abs_error"] < 0.1
    assert variants["graph-chunk"] == pytest.approx(variants["eager"], abs=1e-5)  # the static path: same numbers
    batches = doc["rows"]["batch-graph-chunk-2cam"]["batches"]
    assert sorted(batches) == ["1", "2"] and all(b["chunks_per_s"] > 0 for b in batches.values())
    fp8 = doc["rows"]["fp8-graph-chunk-2cam"]
    assert fp8["precision"].startswith("fp8 (torch-fp8)") and fp8["fidelity"]["cosine_min"] > 0.99
    tests = doc["rows"]["gpu-tests"]
    assert "tests/engines/test_cuda_graph.py" in tests["files"] and "skipped" in tests["tests"]


def test_floors_targets_and_markdown(dry_run):
    doc, md, done = dry_run
    floors = doc["floors"]["2"]
    assert floors["chunk"]["ms"] == pytest.approx(floors["prefill"]["ms"] + 10 * floors["step"]["ms"])
    assert doc["floors"]["2"]["prefill"]["ms"] > doc["floors"]["1"]["prefill"]["ms"]  # a camera's tokens cost
    targets = {t["target"]: t for t in doc["targets"]}
    chunk = doc["rows"]["graph-chunk-2cam"]["summary"]["chunk_ms"]
    assert targets["whole-chunk graph chunk / floor"]["value"] == pytest.approx(chunk["median"] / chunk["floor"])
    eager = doc["rows"]["eager-bf16-2cam"]["summary"]["chunk_ms"]["median"]
    assert targets["bf16 eager / whole-chunk graph"]["value"] == pytest.approx(eager / chunk["median"])
    assert all(t["passed"] in (True, False) for t in doc["targets"])
    assert "## Roofline floor" in md and "## Targets" in md and "| graph-chunk-2cam | bfloat16 |" in md
    assert f"torch {torch.__version__}" in md and "floors (bf16, ms): 1 cam prefill" in done.stderr


FAKE_WORKER = """
import json, os, sys, time
job = json.load(open(sys.argv[-1]))
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(job["rows"]) + "\\n")
print("@@start " + json.dumps({"id": "weights"}), flush=True)
for row in job["rows"]:
    print("@@start " + json.dumps({"id": row}), flush=True)
    if row == "graph-chunk-2cam":
        time.sleep(60)  # hangs: the supervisor's cap ends it
    if row == "graph-step-2cam":
        print("CUDA error: an illegal memory access", file=sys.stderr, flush=True)
        os._exit(3)  # dies
    print("@@result " + json.dumps({"id": row, "status": "ok"}), flush=True)
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    tool = load_tool("gpu_acceptance")
    script = tmp_path / "fake_worker.py"
    script.write_text(textwrap.dedent(FAKE_WORKER))
    monkeypatch.setattr(tool, "WORKER", [sys.executable, str(script)])
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    short = tuple(replace(r, cap_s=2.0) if r.id == "graph-chunk-2cam" else r for r in tool.rows.ROWS)
    monkeypatch.setattr(tool.rows, "ROWS", short)
    return tool, tmp_path


ROWS = ["eager-bf16-2cam", "graph-chunk-2cam", "graph-step-2cam", "fidelity-2cam"]
BASE = ["--device", "cpu", "--policy", "pi05-tiny", "--rows", *ROWS]


def test_a_hung_row_and_a_dead_worker_are_recorded_and_the_rest_runs(fake):
    tool, tmp = fake
    assert tool.main([*BASE, "--out", str(tmp / "a")]) == 0
    rows = json.loads((tmp / "a" / "acceptance.json").read_text())["rows"]
    assert {k: v["status"] for k, v in rows.items()} == {
        "eager-bf16-2cam": "ok",
        "graph-chunk-2cam": "timeout",
        "graph-step-2cam": "error",
        "fidelity-2cam": "ok",
    }
    assert "over its cap of 2 s" in rows["graph-chunk-2cam"]["error"]["message"]
    assert "worker died (exit 3)" in rows["graph-step-2cam"]["error"]["message"]
    assert "illegal memory access" in rows["graph-step-2cam"]["error"]["message"]
    calls = [json.loads(line) for line in (tmp / "calls.log").read_text().splitlines()]
    assert calls == [ROWS, ROWS[2:], ROWS[3:]]  # a new worker for the rows after each failure
    md = (tmp / "a" / "acceptance.md").read_text()
    assert "| graph-chunk-2cam | - | - |" in md and "timeout: timeout over its cap" in md

    (tmp / "calls.log").unlink()
    assert tool.main([*BASE, "--out", str(tmp / "b"), "--resume", str(tmp / "a" / "acceptance.json")]) == 0
    assert [json.loads(line) for line in (tmp / "calls.log").read_text().splitlines()] == [ROWS[1:3], ROWS[2:3]]


def test_a_spent_budget_skips_the_rows(fake):
    tool, tmp = fake
    assert tool.main([*BASE, "--budget-s", "0", "--out", str(tmp)]) == 3
    rows = json.loads((tmp / "acceptance.json").read_text())["rows"]
    assert {v["status"] for v in rows.values()} == {"skipped"} and not (tmp / "calls.log").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_refusals_exit_2(tmp_path):
    run = subprocess.run(
        [sys.executable, "tools/gpu_acceptance.py", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "--device cuda, but torch sees no GPU" in run.stderr
    run = subprocess.run(
        [sys.executable, "tools/gpu_acceptance.py", "--iters", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "--iters" in run.stderr


def test_profile_from_the_gpu_name_and_wheels():
    tool = load_tool("gpu_acceptance")
    assert tool.choose_profile("cuda", "NVIDIA H100 80GB HBM3")[0] == "h100"
    assert tool.choose_profile("cuda", "NVIDIA H200")[0] == "h200"
    assert tool.choose_profile("cuda", "NVIDIA GeForce RTX 4090")[0] == "rtx-4090"
    assert tool.choose_profile("cuda", "NVIDIA A10")[0] == "h100"
    assert tool.choose_profile("cpu", "")[0] == "cpu"
    assert "no *.whl in" in tool.install_wheels(ROOT / "configs")["error"]
