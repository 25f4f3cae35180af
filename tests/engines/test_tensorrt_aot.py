"""TensorRT builds of the exported graphs, ahead of time for SM89 with tensorrt-rtx (no GPU needed), and the
engine on a GPU."""

import pytest

from vlash.engines.artifact import ArtifactManifest


@pytest.fixture(scope="module")
def trt():
    return pytest.importorskip("tensorrt_rtx")


@pytest.mark.trt
@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "fp16", "fp8", "int8"])
def test_build_plans_ahead_of_time_for_sm89(trt, onnx_artifact, tmp_path, precision):
    import shutil

    from vlash.engines.tensorrt_build import build_plans
    from vlash.engines.tensorrt_cache import EngineCache
    from vlash.quant.calibration import FrameSpec
    from vlash.quant.onnx_artifact import qdq_writer

    artifact = tmp_path / "artifact"
    shutil.copytree(onnx_artifact, artifact)
    manifest = ArtifactManifest.load(artifact)
    cache = EngineCache(tmp_path / "cache")
    calibration = FrameSpec(tasks=("reach",), episodes=1, frames_per_episode=2)  # small: a build test
    build_plans(
        artifact, manifest, precision, compute_capability="SM89", cache=cache, qdq_graphs=qdq_writer(calibration)
    )
    assert manifest.engine == "tensorrt" and manifest.files == {"prefill": "prefill.plan", "denoise": "denoise.plan"}
    assert all((artifact / name).stat().st_size > 0 for name in manifest.files.values())
    assert manifest.notes["tensorrt"]["target"] == "aot-sm89"
    assert len(list(cache.directory.glob("*.plan"))) == 2
    if precision == "int8":  # QDQ graphs calibrated on simulated frames, not random data
        assert manifest.notes["calibration"]["source"] == "vlash.sim"


def test_unknown_compute_capability_is_a_config_error(trt, onnx_artifact):
    from vlash.engines.tensorrt_build import build_engine
    from vlash.errors import ConfigError

    with pytest.raises(ConfigError, match="SM90"):
        build_engine(onnx_artifact / "denoise.onnx", "fp32", compute_capability="SM90")


def test_a_free_input_dimension_needs_its_shape(trt, onnx_artifact):
    from vlash.engines.tensorrt_build import build_engine
    from vlash.errors import ConfigError

    with pytest.raises(ConfigError, match="'tau' has a free dimension"):
        build_engine(onnx_artifact / "denoise.onnx", "fp32", compute_capability="SM89")


@pytest.mark.gpu
@pytest.mark.trt
def test_tensorrt_engine_matches_torch(onnx_artifact, tiny_model, tmp_path):
    import shutil

    import torch

    from vlash.engines import create_engine
    from vlash.engines.tensorrt_build import build_plans
    from vlash.policies.pi05.examples import random_inputs

    artifact = tmp_path / "artifact"
    shutil.copytree(onnx_artifact, artifact)
    manifest = ArtifactManifest.load(artifact)
    build_plans(artifact, manifest, "fp32")
    manifest.save(artifact)
    engine = create_engine("tensorrt", artifact=artifact)
    inputs = random_inputs(engine.config, device="cuda")
    model = tiny_model.to("cuda")
    x = torch.randn(1, engine.config.action_horizon, engine.config.action_dim, device="cuda")
    tau = torch.full((1, engine.config.action_horizon), 0.7, device="cuda")
    with torch.no_grad():
        ref = model.denoise_step(x, tau, model.prefill(inputs))
        for _ in range(3):  # the first call captures the CUDA graph, later ones replay it
            got = engine.denoise_step(x, tau, engine.prefill(inputs))
    torch.testing.assert_close(got, ref.float(), rtol=1e-3, atol=1e-3)


@pytest.mark.trt
@pytest.mark.slow
def test_a_lerobot_policy_builds_with_an_fp32_time_embedding(trt, tmp_path):
    """LeRobot's arithmetic has the time embedding in float64 (vlash.policies.formats.lerobot), which TensorRT lacks:
    its build runs it in fp32 and the manifest says so; onnxruntime keeps float64 (the parity tests)."""
    from pathlib import Path

    from vlash.engines.export import export_artifact
    from vlash.policies.formats.base import CheckpointOptions
    from vlash.policies.formats.loading import load_policy
    from vlash.policies.formats.vlash_dir import save_loaded_policy
    from vlash.policies.pi05.config import load_preset

    shipped = Path(__file__).resolve().parents[2] / "examples" / "lerobot_pi05_tiny"
    options = CheckpointOptions(
        tokenizer=shipped / "tokenizer" / "tokenizer.json", model_config=load_preset(str(shipped / "model_config.yaml"))
    )
    policy = load_policy(shipped / "pretrained_model", options=options)
    assert policy.model.config.time_embedding == "fp64"
    save_loaded_policy(tmp_path / "policy", policy)
    manifest = export_artifact(tmp_path / "trt", engine="tensorrt", precision="fp16", checkpoint=tmp_path / "policy")
    assert manifest.model_config.time_embedding == "fp32" and manifest.files["denoise"] == "denoise.plan"
