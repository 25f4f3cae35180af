"""Artifact manifests and ONNX Runtime provider choice (no export needed)."""

from __future__ import annotations

import json

import pytest

from vlash.devices import load_profile
from vlash.engines import available_engines, create_engine
from vlash.engines.artifact import ArtifactManifest
from vlash.errors import ConfigError, EngineUnavailable


def test_missing_and_broken_manifests_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="run `vlash export` first"):
        ArtifactManifest.load(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ConfigError, match="invalid JSON"):
        ArtifactManifest.load(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"engine": "onnxruntime", "surprise": 1}))
    with pytest.raises(ConfigError, match="surprise"):
        ArtifactManifest.load(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"engine": "onnxruntime", "precision": "fp32", "batch": 1}))
    with pytest.raises(ConfigError, match="config"):
        ArtifactManifest.load(tmp_path)


def test_manifest_names_a_missing_graph_file(tmp_path):
    manifest = ArtifactManifest("onnxruntime", "fp32", 1, config={}, files={"prefill": "prefill.onnx"})
    manifest.save(tmp_path)
    loaded = ArtifactManifest.load(tmp_path)
    with pytest.raises(ConfigError, match="no denoise graph file"):
        loaded.path(tmp_path, "denoise")
    with pytest.raises(ConfigError, match="no prefill graph file"):
        loaded.path(tmp_path, "prefill")


def test_registry_declares_every_backend_and_names_the_extra(monkeypatch):
    assert {"torch", "onnxruntime", "tensorrt"} <= set(available_engines())
    from vlash.engines import base

    monkeypatch.setitem(base._REGISTRY, "tensorrt", ("vlash.engines.no_such_backend_module", "trt"))
    with pytest.raises(EngineUnavailable, match=r"pip install vlash\[trt\]"):
        create_engine("tensorrt", artifact="x")


def test_providers_follow_the_profile():
    pytest.importorskip("onnxruntime")
    from vlash.engines.onnx_engine import choose_providers

    cpu_only = ["CPUExecutionProvider"]
    assert choose_providers(None, cpu_only) == cpu_only
    assert choose_providers(load_profile("cpu"), cpu_only) == cpu_only
    gpu = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    assert choose_providers(load_profile("rtx-4090"), gpu) == gpu
    assert choose_providers(load_profile("jetson-orin"), gpu[1:]) == gpu[1:]
    with pytest.raises(EngineUnavailable, match=r"vlash\[gpu\]"):
        choose_providers(load_profile("h100"), cpu_only)


def test_a_session_that_fell_back_to_another_provider_is_refused():
    from vlash.engines.onnx_engine import check_session_providers
    from vlash.errors import EngineUnavailable

    asked = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    check_session_providers(asked, asked, "prefill")
    check_session_providers(["CPUExecutionProvider"], ["CPUExecutionProvider"], "prefill")
    with pytest.raises(EngineUnavailable, match="asked for TensorrtExecutionProvider but runs on"):
        check_session_providers(asked, asked[1:], "denoise")
