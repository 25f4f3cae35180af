"""The engine registry and the torch engine (eager and torch.compile'd on CPU)."""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import counters

from vlash.engines import available_engines, create_engine
from vlash.errors import ConfigError, ShapeError
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.model import PrefixCache
from vlash.policies.pi05.weights import build_random
from vlash.sampling import FlowSampler, SamplerConfig
from vlash.sampling.guidance import GuidanceConfig


@pytest.fixture(scope="module")
def tiny():
    return build_random(load_preset("pi05-tiny"), seed=2)


@pytest.fixture(scope="module")
def tiny_two_cameras():
    return build_random(load_preset("pi05-tiny").with_cameras(2), seed=3)


def assert_caches_close(got: PrefixCache, want: PrefixCache) -> None:
    for f in fields(PrefixCache):
        torch.testing.assert_close(getattr(got, f.name), getattr(want, f.name), atol=1e-5, rtol=1e-5, msg=f.name)


def test_registry_lists_torch_and_rejects_unknown_names():
    assert "torch" in available_engines()
    with pytest.raises(ConfigError, match="unknown engine 'tensorflow'"):
        create_engine("tensorflow")


def test_compiled_denoise_step_matches_eager(tiny):
    eager = create_engine("torch", model=tiny)
    compiled = create_engine("torch", model=tiny, compile_mode="default")
    cfg = tiny.config
    x = torch.randn(1, cfg.action_horizon, cfg.action_dim)
    tau = torch.rand(1, cfg.action_horizon)
    with torch.no_grad():
        cache = eager.prefill(random_inputs(cfg))
        torch.testing.assert_close(
            compiled.denoise_step(x, tau, cache), eager.denoise_step(x, tau, cache), atol=1e-5, rtol=1e-5
        )
    assert compiled.describe()["compile"] == "default (prefill + step)" and eager.describe()["compile"] == "eager"


def test_engine_rejects_bad_compile_mode(tiny):
    with pytest.raises(ConfigError, match="compile_mode"):
        create_engine("torch", model=tiny, compile_mode="turbo")


def test_warmup_runs_on_synthetic_inputs(tiny):
    engine = create_engine("torch", model=tiny)
    with torch.no_grad():
        engine.warmup(batch_size=2, steps=1)


@pytest.mark.slow
def test_compiled_prefill_matches_eager_and_serves_a_second_batch_size(tiny_two_cameras):
    """Two cameras (row 1's first one absent), prompts of different lengths; batch 3 after batch 2 reuses the graph
    symbolic in the batch (no recompile, no fallback to eager)."""
    cfg = tiny_two_cameras.config
    eager = create_engine("torch", model=tiny_two_cameras)
    compiled = create_engine("torch", model=tiny_two_cameras, compile_mode="default")
    torch._dynamo.reset()
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        for batch, lengths in ((2, (5, cfg.max_token_len)), (3, (cfg.max_token_len, 1, 17))):
            inputs = random_inputs(cfg, batch=batch, seed=batch, valid_tokens=lengths, masked_camera=(1, 0))
            graphs = counters["stats"]["unique_graphs"]
            cache = compiled.prefill(inputs)  # autograd on: the engine runs the prefill without it
            assert counters["stats"]["unique_graphs"] == graphs + (batch == 2)
            assert not any(getattr(cache, f.name).requires_grad for f in fields(PrefixCache))
            assert_caches_close(cache, eager.prefill(inputs))


@pytest.mark.slow
def test_compiled_graphs_for_batches_1_to_8_stay_within_the_recompile_limit(tiny_two_cameras, monkeypatch):
    """Warm-up compiles the prefill and the step; then batches 1..8 through the sampler (tau [B, 1] and per token,
    guided RTC, rows leaving) add one prefill graph (batch >= 2) and the step's {1, >= 2} x tau-shape graphs, plus as
    many for the guided steps, each function within torch._dynamo.config.recompile_limit (a counting backend)."""
    compile_ = torch.compile
    graphs: dict[str, CompileCounter] = {}

    def counting(fn, mode=None, **options):
        graphs[fn.__name__] = CompileCounter()
        return compile_(fn, backend=graphs[fn.__name__], **options)

    monkeypatch.setattr(torch, "compile", counting)
    cfg = tiny_two_cameras.config
    horizon, dims = cfg.action_horizon, cfg.action_dim
    engine = create_engine("torch", model=tiny_two_cameras, compile_mode="default")
    torch._dynamo.reset()
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        with torch.no_grad():
            engine.warmup(batch_size=1, steps=1)
        counts = {name: counter.frame_count for name, counter in graphs.items()}
        assert counts == {"_prefill_graph": 1, "denoise_step": 2, "_differentiable_step": 0}
        guided = SamplerConfig(num_steps=2, guidance=GuidanceConfig(execution_horizon=10, vjp=True))  # autograd on
        for batch in range(1, 9):
            cache = engine.prefill(random_inputs(cfg, batch=batch, seed=batch))
            noise, target = torch.randn(batch, horizon, dims), torch.randn(batch, horizon, dims)
            step = lambda x, tau: engine.denoise_step(x, tau, cache)  # noqa: B023
            for schedule in ("constant", "horizon-aware"):
                FlowSampler(SamplerConfig(num_steps=2, schedule=schedule)).sample(step, noise, shared_time=True)
            FlowSampler(guided).sample(step, noise, guidance_target=target, guidance_delay=3, shared_time=True)
            prefix = noise[:, :3]  # a prefix makes the guided steps' times per token
            FlowSampler(guided).sample(step, noise, prefix=prefix, guidance_target=target, shared_time=True)
            if batch > 1:  # the first row left the batch
                with torch.no_grad():
                    rows = torch.arange(1, batch)
                    engine.denoise_step(noise[1:], torch.rand(batch, horizon)[1:], cache.select(rows))
    counts = {name: counter.frame_count for name, counter in graphs.items()}
    assert counts == {"_prefill_graph": 2, "denoise_step": 4, "_differentiable_step": 4}
    assert max(counts.values()) <= torch._dynamo.config.recompile_limit


def test_compile_prefill_false_keeps_the_prefill_eager(tiny):
    engine = create_engine("torch", model=tiny, compile_mode="default", compile_prefill=False)
    assert engine.describe()["compile"] == "default (step)"
    cache = engine.prefill(random_inputs(tiny.config))
    torch.testing.assert_close(cache.keys, tiny.prefill(random_inputs(tiny.config)).keys, atol=0, rtol=0)


def test_compiled_prefill_rejects_bad_shapes_before_tracing(tiny):
    engine = create_engine("torch", model=tiny, compile_mode="default")
    inputs = random_inputs(tiny.config)
    inputs.tokens = inputs.tokens[:, :5]
    with pytest.raises(ShapeError, match="inputs.tokens"):
        engine.prefill(inputs)
