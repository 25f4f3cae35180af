"""tools/eval_suite.sh in its smoke mode: one oracle episode on reach into a temporary EVAL_SUITE_OUT (never the
tree), and it is the shipped result's episode of the same seed (the evaluation is deterministic)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.tools.tool_loader import ROOT
from vlash.eval.report import read_summary

pytestmark = pytest.mark.sim
REPORT = ROOT / "docs" / "eval" / "report"


def test_one_oracle_episode_into_eval_suite_out_equals_the_shipped_one(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vlash").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m vlash.cli.main "$@"\n')
    (bin_dir / "vlash").chmod(0o755)  # `vlash` on PATH is this interpreter with this checkout
    out = tmp_path / "report"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "EVAL_SUITE_OUT": str(out),
    }
    shipped = sorted(p.name for p in REPORT.iterdir())
    command = ["tools/eval_suite.sh", "oracle", "smoke", "1", "0", "sync", "reach"]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["smoke-reach.json.gz", "smoke-reach.png"]
    assert sorted(p.name for p in REPORT.iterdir()) == shipped
    [episode] = read_summary(out / "smoke-reach.json.gz")["episodes"]
    assert (episode["task"], episode["mode"], episode["delay"]) == ("reach", "sync", 0)
    same = [e for e in read_summary(REPORT / "oracle-reach.json.gz")["episodes"] if e["seed"] == episode["seed"]]
    reference = next(e for e in same if (e["mode"], e["delay"]) == ("sync", 0))
    exact = ("success", "steps", "requests", "seed")
    assert {k: episode[k] for k in exact} == {k: reference[k] for k in exact}
    assert episode["completion_s"] == pytest.approx(reference["completion_s"])
    assert episode["jerk"] == pytest.approx(reference["jerk"], rel=1e-5)


def test_without_a_policy_and_a_name_it_prints_its_usage(tmp_path):
    env = {**os.environ, "EVAL_SUITE_OUT": str(tmp_path)}
    run = subprocess.run(
        ["tools/eval_suite.sh", "oracle"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 2 and run.stderr.startswith("usage: tools/eval_suite.sh POLICY NAME ")
    assert list(tmp_path.iterdir()) == []
