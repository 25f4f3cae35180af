"""`vlash export --engine tensorrt` says what it built: a TensorRT-RTX ahead-of-time plan, for which GPUs, whether
this machine can load it, and that it is no Jetson (JetPack TensorRT) engine. Before, it said "engines built"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlash.cli.main import main
from vlash.engines.tensorrt_targets import NO_GPU, aot_targets, describe_build

MICRO = Path(__file__).resolve().parents[1] / "train" / "pi05-micro.yaml"
RTX = {"module": "tensorrt_rtx", "version": "1.7.1.116", "target": NO_GPU, "gpus": ["SM80", "SM86", "SM89", "SM120"]}


def test_an_rtx_build_without_a_gpu_says_where_it_runs_and_where_not():
    what, here, jetson = describe_build({**RTX, "built_on": NO_GPU})
    assert what.startswith("TensorRT-RTX 1.7.1.116 ahead-of-time plans for SM80, SM86, SM89, SM120"), what
    assert "not H100 / H200, SM90" in what, what
    assert "cannot load on this machine (no GPU)" in here, here
    assert jetson.startswith("not a Jetson engine") and "JetPack's TensorRT" in jetson, jetson


def test_a_build_on_a_gpu_leaves_out_the_no_gpu_line():
    lines = describe_build({**RTX, "built_on": "NVIDIA_GeForce_RTX_4090-sm89"})
    assert len(lines) == 2 and not any("cannot load" in line for line in lines), lines
    classic = describe_build({"module": "tensorrt", "version": "10.3", "target": "Orin-sm87", "built_on": "Orin-sm87"})
    assert classic == ["TensorRT 10.3 plans for this machine's GPU (Orin-sm87); they load on that GPU"]


def test_the_default_targets_are_tensorrt_rtx_own():
    trt = pytest.importorskip("tensorrt_rtx")
    targets = aot_targets(trt, None)
    assert {"SM86", "SM89", "SM120"} <= set(targets) and not {"SM75", "NONE", "CURRENT"} & set(targets), targets
    assert aot_targets(trt, "sm89") == ["SM89"]


@pytest.mark.trt
def test_export_says_what_it_built(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tensorrt_rtx")
    monkeypatch.setenv("VLASH_TRT_CACHE", str(tmp_path / "plans"))  # not the user's plan cache
    pytest.importorskip("onnxruntime")
    import torch

    out = tmp_path / "trt"
    argv = ["export", "--policy", str(MICRO), "--random-weights", "--engine", "tensorrt", "--out", str(out)]
    assert main(argv) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("vlash export: ")]
    notes = json.loads((out / "manifest.json").read_text())["notes"]["tensorrt"]
    assert notes["module"] == "tensorrt_rtx" and "SM89" in notes["gpus"], notes
    assert any("TensorRT-RTX" in line and "ahead-of-time plans for" in line and "SM89" in line for line in lines), lines
    assert any("not a Jetson engine" in line for line in lines), lines
    no_gpu = not torch.cuda.is_available()
    assert (notes["built_on"] == NO_GPU) == no_gpu, notes
    assert any("cannot load on this machine (no GPU)" in line for line in lines) == no_gpu, lines
    assert not any("engines built" in line for line in lines), lines
