"""`vlash export` writes a complete artifact atomically; `vlash serve --engine onnxruntime` runs it."""

from __future__ import annotations

import json

import pytest

from vlash.cli.main import main
from vlash.engines import export as export_module
from vlash.engines.artifact import ArtifactManifest
from vlash.runtime.loading import example_request, load_runtime

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def exported(onnx_artifact):
    return onnx_artifact  # written by `vlash export --policy pi05-tiny --random-weights` (conftest)


def test_export_writes_graphs_manifest_and_policy(exported):
    manifest = ArtifactManifest.load(exported)
    names = {p.name for p in exported.iterdir()}
    assert {"manifest.json", "prefill.onnx", "denoise.onnx", "policy"} <= names
    assert {"config.yaml", "model.safetensors", "stats.safetensors"} <= {
        p.name for p in (exported / "policy").iterdir()
    }
    assert manifest.policy == "pi05-tiny" and manifest.files == {"prefill": "prefill.onnx", "denoise": "denoise.onnx"}
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")]  # no staging leftovers


def test_a_failed_export_leaves_the_previous_artifact_whole(exported, monkeypatch, capsys):
    before = {p.name: p.stat().st_size for p in exported.iterdir()}

    def broken(*args, **kwargs):
        raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of the export

    monkeypatch.setattr(export_module, "export_onnx", broken)
    with pytest.raises(KeyboardInterrupt):
        main(["export", "--policy", "pi05-tiny", "--random-weights", "--out", str(exported), "--overwrite"])
    assert {p.name: p.stat().st_size for p in exported.iterdir()} == before
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")]


def test_tensorrt_without_a_builder_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(export_module, "TENSORRT_BUILDER", "vlash.engines.no_such_builder")
    out = tmp_path / "trt"
    code = main(["export", "--policy", "pi05-tiny", "--random-weights", "--engine", "tensorrt", "--out", str(out)])
    assert code == 2 and "not available" in capsys.readouterr().err
    assert not out.exists()


def test_bad_precision_and_sources_fail_before_writing(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["export", "--policy", "pi05-tiny", "--random-weights", "--precision", "int3", "--out", str(out)]) == 2
    assert "precision" in capsys.readouterr().err and not out.exists()
    assert main(["export", "--checkpoint", str(tmp_path), "--out", str(out)]) == 2
    assert "config.yaml" in capsys.readouterr().err


def test_serve_loads_the_artifact_with_onnxruntime(exported):
    loaded = load_runtime(checkpoint=exported, engine="onnxruntime", device="cpu")
    assert loaded.runtime.engine.describe()["engine"] == "onnxruntime" and loaded.model_id == "pi05-tiny"
    result = loaded.runtime.run(example_request(loaded.runtime))
    assert result.actions.shape == (loaded.runtime.horizon, loaded.runtime.action_dims)


def test_serve_with_an_artifact_engine_needs_an_artifact():
    from vlash.errors import ConfigError

    with pytest.raises(ConfigError, match="vlash export"):
        load_runtime(policy="pi05-tiny", random_weights=True, engine="onnxruntime", device="cpu")


def test_bench_times_an_artifact_without_naming_its_policy(exported, capsys):
    args = ["bench", "--artifact", str(exported), "--steps", "2", "--iters", "2", "--warmup", "1", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["engine"]["engine"] == "onnxruntime" and report["summary"]["step_ms"]["n"] == 2 * 2
    assert main([*args[:3], "--policy", "pi05-tiny", "--iters", "1"]) == 2  # the artifact fixes the policy
    assert "drop --policy" in capsys.readouterr().err
    assert main([*args[:3], "--engine", "torch", "--iters", "1"]) == 2
    assert "use --engine onnxruntime" in capsys.readouterr().err
    assert main(["bench", "--iters", "1"]) == 2
    assert "give --policy NAME" in capsys.readouterr().err
