"""tools/cpu_precheck.py: the smoke run (pi05-tiny) takes every row through its path for real and compares it; the
memory guard refuses to start and kills a worker; the targets fail where a row disagrees."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.tools.tool_loader import ROOT, load_tool


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("precheck")
    cmd = [sys.executable, "tools/cpu_precheck.py", "--smoke", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    return json.loads((out / "precheck.json").read_text()), (out / "precheck.md").read_text(), out


def test_the_smoke_run_takes_every_row_and_meets_the_targets(smoke):
    doc, md, _ = smoke
    rows = load_tool("cpu_precheck_rows")
    assert list(doc["rows"]) == [r.id for r in rows.CANDIDATES]
    assert list(doc["runs"]["fp32"]["rows"]) == [r.id for r in rows.REFERENCES]
    assert all(r["status"] == "ok" for r in doc["rows"].values()), {k: r.get("error") for k, r in doc["rows"].items()}
    assert all(t["passed"] is True for t in doc["targets"]), doc["targets"]
    for row_id, r in doc["rows"].items():
        row = rows.ROWS[row_id]
        assert 0.99 < r["cosine_vs_fp32"] < 1.0 and 0 < r["max_abs_vs_fp32"] < 0.1  # close to fp32, not equal
        if row.graphs:
            assert r["max_abs_vs_eager"] <= 1e-3 and r["engine"]["compile"].endswith(f"not captured ({row.graphs})")
        if row.chunks == 2:
            assert r["max_abs_first_vs_last"] == 0.0  # the chunk that built the programs and the next agree
        assert r["peak_rss_gib"] > 0 and r["peak_rss_scope"] == "row" and len(r["chunk_s"]) == row.chunks
    assert doc["rows"]["fp8-graph-chunk"]["engine"]["quant"] == "torch-fp8"
    assert doc["rows"]["bf16-graph-chunk-batch2"]["programs"][0] == "prefill(B=2)"
    assert "| bf16-graph-step | step | constant | 1 | [B, 1] |" in md and "| static program vs eager" in md


def test_the_saved_actions_are_the_rows_chunks(smoke):
    _, _, out = smoke
    report = load_tool("cpu_precheck_report")
    fp32, bf16 = report.load(out, "fp32"), report.load(out, "bf16")
    assert fp32["fp32-eager-batch2"].shape == (2, 50, 32) and bf16["bf16-eager"].shape == (1, 50, 32)
    assert not np.array_equal(fp32["fp32-eager-batch2"][0], fp32["fp32-eager-batch2"][1])  # two prompts, two chunks
    assert report.cosine_min(bf16["bf16-eager"], fp32["fp32-eager"]) > 0.999


def test_not_enough_memory_to_start_exits_2(tmp_path, monkeypatch):
    tool = load_tool("cpu_precheck")
    monkeypatch.setattr(tool, "available_gib", lambda: 0.5)
    assert tool.main(["--smoke", "--out", str(tmp_path), "--wait-memory-s", "0"]) == 2
    assert not (tmp_path / "fp32.json").exists()


def test_the_guard_kills_a_worker_when_memory_runs_low(tmp_path, monkeypatch):
    tool = load_tool("cpu_precheck")
    monkeypatch.setattr(tool, "MIN_AVAILABLE_GIB", 1e6)  # every poll is "low": the worker dies at once
    assert tool.main(["--smoke", "--out", str(tmp_path), "--rows", "fp32-eager", "bf16-eager"]) == 1
    doc = json.loads((tmp_path / "precheck.json").read_text())
    assert doc["runs"]["fp32"]["exit"] == -9 and "memory available fell" in doc["runs"]["fp32"]["killed"]
    assert doc["runs"]["fp32"]["rows"]["fp32-eager"]["status"] == "not run"
    assert doc["targets"][0]["passed"] is False


def test_a_static_row_that_differs_from_eager_fails_its_target():
    report = load_tool("cpu_precheck_report")
    ok = {"status": "ok", "cosine_vs_fp32": 0.9999, "max_abs_vs_fp32": 0.01}
    table = {"bf16-eager": dict(ok), "bf16-graph-chunk": ok | {"max_abs_vs_eager": 2e-3}}
    verdicts = {t["target"]: t["passed"] for t in report.targets(table, {})}
    assert verdicts["static program vs eager, same dtype (max abs)"] is False
    assert verdicts["bf16 cosine vs fp32 (min)"] is True
    assert verdicts["torch-fp8 cosine vs fp32 (min)"] is None  # no fp8 row: nothing judged
