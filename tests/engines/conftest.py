from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def onnx_artifact(tmp_path_factory):
    """pi05-tiny with random weights, exported once by `vlash export` (fp32, batch 1) for every ONNX test."""
    pytest.importorskip("onnxruntime")
    from vlash.cli.main import main

    out = tmp_path_factory.mktemp("export") / "pi05-tiny-onnx"
    assert main(["export", "--policy", "pi05-tiny", "--random-weights", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def tiny_model(onnx_artifact):
    """The torch model the artifact was exported from (its policy/ copy)."""
    from vlash.policies.formats.loading import load_policy

    return load_policy(onnx_artifact / "policy").model
