"""ONNX Runtime engine vs the torch engine on pi05-tiny (fp32): prefill tensors, one velocity, full chunks."""

from __future__ import annotations

import pytest
import torch

from vlash.engines import create_engine
from vlash.engines.artifact import CACHE_TENSORS, ArtifactManifest, tensor_specs
from vlash.errors import EngineUnavailable, ShapeError
from vlash.policies.pi05.examples import random_inputs
from vlash.sampling import FlowSampler, SamplerConfig

pytest.importorskip("onnxruntime")
TOL = 1e-4


@pytest.fixture(scope="module")
def engines(tiny_model, onnx_artifact):
    return create_engine("torch", model=tiny_model), create_engine("onnxruntime", artifact=onnx_artifact, threads=1)


def test_manifest_records_graphs_and_tensor_shapes(onnx_artifact, tiny_model):
    manifest = ArtifactManifest.load(onnx_artifact)
    assert manifest.engine == "onnxruntime" and manifest.precision == "fp32" and manifest.opset >= 17
    assert manifest.tensors == tensor_specs(tiny_model.config, 1, "fp32")
    assert manifest.model_config == tiny_model.config
    assert (onnx_artifact / manifest.files["prefill"]).is_file() and (
        onnx_artifact / manifest.files["denoise"]
    ).is_file()


def test_prefill_and_velocity_match_torch(engines, tiny_model):
    ref, ort = engines
    inputs = random_inputs(tiny_model.config, seed=5, valid_tokens=(17,))
    with torch.no_grad():
        want, got = ref.prefill(inputs), ort.prefill(inputs)
        for name in CACHE_TENSORS:
            torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=TOL, rtol=0)
        x = torch.randn(1, tiny_model.config.action_horizon, tiny_model.config.action_dim)
        tau = torch.rand(1, tiny_model.config.action_horizon)
        torch.testing.assert_close(ort.denoise_step(x, tau, got), ref.denoise_step(x, tau, want), atol=TOL, rtol=0)


@pytest.mark.parametrize("schedule", ["constant", "horizon-aware"])
def test_full_sampled_chunk_matches_torch(engines, tiny_model, schedule):
    cfg = tiny_model.config
    sampler = FlowSampler(SamplerConfig(num_steps=5, schedule=schedule))
    noise = torch.randn(1, cfg.action_horizon, cfg.action_dim, generator=torch.Generator().manual_seed(3))
    inputs = random_inputs(cfg, seed=9)
    chunks = []
    with torch.no_grad():
        for engine in engines:
            cache = engine.prefill(inputs)
            for shared_time in (False, True):
                step = lambda x, tau, e=engine, c=cache: e.denoise_step(x, tau, c)  # noqa: E731
                chunks.append(sampler.sample(step, noise, shared_time=shared_time).actions)
    for chunk in chunks[1:]:
        torch.testing.assert_close(chunk, chunks[0], atol=TOL, rtol=0)


def test_one_time_per_row_runs_through_the_free_time_axis(engines, tiny_model):
    ref, ort = engines
    cfg = tiny_model.config
    assert ort.shared_time_graph and ort.describe()["shared_time"]
    x, tau = torch.randn(1, cfg.action_horizon, cfg.action_dim), torch.full((1, 1), 0.6)
    with torch.no_grad():
        inputs = random_inputs(cfg, seed=4)
        cache, ref_cache = ort.prefill(inputs), ref.prefill(inputs)
        shared = ort.denoise_step(x, tau, cache)
        per_token = ort.denoise_step(x, tau.expand(1, cfg.action_horizon), cache)
        want = ref.denoise_step(x, tau, ref_cache)
    torch.testing.assert_close(shared, per_token, atol=TOL, rtol=0)
    torch.testing.assert_close(shared, want, atol=TOL, rtol=0)


def test_an_export_with_a_static_time_axis_gets_the_shared_time_broadcast(tiny_model, tmp_path, monkeypatch):
    from vlash.engines import onnx_export

    monkeypatch.setattr(onnx_export, "TAU_AXES", None)  # what exports before the free time axis wrote
    onnx_export.export_onnx(tiny_model, tmp_path / "static", policy="pi05-tiny")
    ort = create_engine("onnxruntime", artifact=tmp_path / "static", threads=1)
    assert not ort.shared_time_graph
    cfg = tiny_model.config
    x, tau = torch.randn(1, cfg.action_horizon, cfg.action_dim), torch.full((1, 1), 0.6)
    with torch.no_grad():
        cache = ort.prefill(random_inputs(cfg, seed=4))
        shared, per_token = (ort.denoise_step(x, t, cache) for t in (tau, tau.expand(1, cfg.action_horizon)))
    assert torch.equal(shared, per_token)


def test_intra_op_threads_do_not_spin_unless_asked(engines, onnx_artifact):
    def spinning(engine):
        from vlash.engines.onnx_engine import SPINNING

        return {engine._denoise.get_session_options().get_session_config_entry(SPINNING)}

    _, ort = engines
    assert not ort.spinning and spinning(ort) == {"0"}
    assert spinning(create_engine("onnxruntime", artifact=onnx_artifact, threads=1, spinning=True)) == {"1"}


def test_the_runtime_gives_onnxruntime_the_threads_it_was_told(onnx_artifact):
    from vlash.runtime.loading import load_runtime

    runtime = load_runtime(checkpoint=onnx_artifact, engine="onnxruntime", device="cpu", threads=1).runtime
    assert runtime.engine.threads == 1


def test_a_new_prefill_rebinds_the_cache(engines, tiny_model):
    ref, ort = engines
    cfg = tiny_model.config
    x, tau = torch.randn(1, cfg.action_horizon, cfg.action_dim), torch.full((1, cfg.action_horizon), 0.7)
    with torch.no_grad():
        first = ort.denoise_step(x, tau, ort.prefill(random_inputs(cfg, seed=1)))
        second_cache = ort.prefill(random_inputs(cfg, seed=2))
        second = ort.denoise_step(x, tau, second_cache)
        want = ref.denoise_step(x, tau, ref.prefill(random_inputs(cfg, seed=2)))
    assert (first - second).abs().max() > 1e-3
    torch.testing.assert_close(second, want, atol=TOL, rtol=0)


def test_shapes_other_than_the_exported_ones_and_autograd_are_refused(engines, tiny_model):
    _, ort = engines
    cfg = tiny_model.config
    with pytest.raises(ShapeError, match="artifact expects"):
        ort.prefill(random_inputs(cfg, batch=2))
    cache = ort.prefill(random_inputs(cfg))
    x = torch.randn(1, cfg.action_horizon, cfg.action_dim, requires_grad=True)
    with pytest.raises(EngineUnavailable, match="torch engine"):
        ort.denoise_step(x, torch.rand(1, cfg.action_horizon), cache)


def test_describe_and_warmup(engines):
    _, ort = engines
    ort.warmup(steps=1)
    info = ort.describe()
    assert info["engine"] == "onnxruntime" and info["providers"][-1] == "CPUExecutionProvider"
