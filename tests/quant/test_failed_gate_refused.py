"""A quantized artifact whose recorded fidelity gate failed is refused by `vlash serve` and `vlash bench` (and
their library paths) unless --allow-failed-gate; an unchecked one is allowed and said to be; reports call its
precision by its weights, e.g. "int8 (onnx-int8-dynamic) / fp32 activations"."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from vlash.cli.main import main, parse_args
from vlash.errors import CheckpointError
from vlash.policies.quantized.gate import FailedGateError, RecordedGate
from vlash.runtime.loading import load_runtime

# a real --check whose thresholds no quantized model meets: the manifest records a failed gate
FAILING = ["--check", "--held-out-episodes", "1", "--min-cosine", "1", "--max-abs-error", "0"]
BENCH = ["--device", "cpu", "--iters", "1", "--warmup", "0", "--threads", "1"]


def _quantize(policy_dir: Path, out: Path, scheme: str, *check: str) -> Path:
    main(["quantize", "--checkpoint", str(policy_dir), "--scheme", scheme, "--out", str(out), "--threads", "1", *check])
    return out


@pytest.fixture(scope="module")
def failed_int8(micro_policy_dir, tmp_path_factory) -> Path:
    return _quantize(micro_policy_dir, tmp_path_factory.mktemp("gate") / "int8", "torch-int8", *FAILING)


@pytest.fixture(scope="module")
def failed_onnx(micro_policy_dir, tmp_path_factory) -> Path:
    pytest.importorskip("onnxruntime")
    return _quantize(micro_policy_dir, tmp_path_factory.mktemp("gate") / "dyn", "onnx-int8-dynamic", *FAILING)


def test_serve_refuses_a_failed_gate_and_names_its_metrics_and_thresholds(failed_int8):
    from vlash.cli import serve_run

    # serve's own plan and load (what `vlash serve` runs before serving; a test cannot block on the serve loop)
    argv = ["serve", "--checkpoint", str(failed_int8), "--bind", "tcp://127.0.0.1:0", "--no-warmup"]
    args = parse_args(argv)
    with pytest.raises(FailedGateError) as refused:
        serve_run.load(serve_run.plan(args), args)
    message = str(refused.value)
    assert "\n" not in message and "torch-int8 gate FAIL" in message and "action cosine min" in message
    assert "(gate >= 1)" in message and "(gate <= 0)" in message and "--allow-failed-gate" in message, message
    args = parse_args([*argv, "--allow-failed-gate"])
    assert serve_run.load(serve_run.plan(args), args).gate.verdict == "FAIL"


def test_load_runtime_uses_a_failed_gate_only_when_allowed(failed_int8, caplog):
    with pytest.raises(FailedGateError, match="failed its fidelity gate"):
        load_runtime(checkpoint=failed_int8, device="cpu")
    with caplog.at_level(logging.WARNING):
        loaded = load_runtime(checkpoint=failed_int8, device="cpu", allow_failed_gate=True)
    assert loaded.gate is not None and loaded.gate.verdict == "FAIL"
    assert "used anyway (--allow-failed-gate)" in caplog.text
    assert loaded.precision == "int8 (torch-int8) / fp32 activations"


def test_an_unchecked_artifact_is_allowed_and_said_to_be_unchecked(micro_policy_dir, tmp_path, caplog):
    out = _quantize(micro_policy_dir, tmp_path / "int8", "torch-int8")
    with caplog.at_level(logging.WARNING):
        loaded = load_runtime(checkpoint=out, device="cpu")
    assert loaded.gate is not None and loaded.gate.verdict == "never checked"
    assert "never checked" in caplog.text


def test_a_passed_gate_loads_without_a_warning(micro_policy_dir, tmp_path, caplog):
    out = _quantize(micro_policy_dir, tmp_path / "int8", "torch-int8", "--check", "--held-out-episodes", "1")
    with caplog.at_level(logging.WARNING):
        loaded = load_runtime(checkpoint=out, device="cpu")
    assert loaded.gate is not None and loaded.gate.passed and "gate" not in caplog.text


def test_an_fp32_policy_has_no_gate(micro_policy_dir):
    assert load_runtime(checkpoint=micro_policy_dir, device="cpu").gate is None


def test_bench_refuses_a_failed_engine_artifact_unless_allowed(failed_onnx, capsys):
    assert main(["bench", "--artifact", str(failed_onnx), *BENCH]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "onnx-int8-dynamic gate FAIL" in err and "(gate >= 1)" in err and "--allow-failed-gate" in err, err
    assert main(["bench", "--artifact", str(failed_onnx), *BENCH, "--allow-failed-gate"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "precision=int8 (onnx-int8-dynamic) / fp32 activations" in out, out
    assert "quantization: onnx-int8-dynamic gate FAIL" in out, out
    assert main(["bench", "--artifact", str(failed_onnx), *BENCH, "--allow-failed-gate", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["precision"] == "int8 (onnx-int8-dynamic) / fp32 activations" and "FAIL" in report["gate"]


def test_serving_a_failed_engine_artifact_is_refused(failed_onnx):
    with pytest.raises(FailedGateError, match="onnx-int8-dynamic gate FAIL"):
        load_runtime(checkpoint=failed_onnx, engine="onnxruntime", device="cpu")
    loaded = load_runtime(checkpoint=failed_onnx, engine="onnxruntime", device="cpu", allow_failed_gate=True)
    assert loaded.precision == "int8 (onnx-int8-dynamic) / fp32 activations"


def test_a_recorded_gate_without_a_verdict_is_a_checkpoint_error():
    with pytest.raises(CheckpointError, match="'passed'"):
        RecordedGate("torch-int8", {"passed": "yes"})
    assert RecordedGate.from_quantization(None) is None
    legacy = RecordedGate.from_quantization({"fidelity": {"variant": "trt-int8", "passed": True}})
    assert legacy is not None and legacy.scheme == "trt-int8" and "cosine min ?" in legacy.describe()
