"""Guided RTC as LeRobot runs it (v held constant: no autograd) runs on the ONNX Runtime engine and gives the torch
engine's chunk; the paper's form (GuidanceConfig.vjp) differentiates through the step, which an export cannot."""

from __future__ import annotations

import pytest
import torch

from vlash.engines import create_engine
from vlash.errors import EngineUnavailable
from vlash.policies.pi05.examples import random_inputs
from vlash.sampling import FlowSampler, GuidanceConfig, SamplerConfig

pytest.importorskip("onnxruntime")


def _guided(engine, cfg, vjp: bool) -> torch.Tensor:
    cache = engine.prefill(random_inputs(cfg, seed=3))
    gen = torch.Generator().manual_seed(4)
    noise, target = (torch.randn(1, cfg.action_horizon, cfg.action_dim, generator=gen) for _ in range(2))
    sampler = FlowSampler(SamplerConfig(num_steps=4, guidance=GuidanceConfig(execution_horizon=10, vjp=vjp)))
    step = lambda x, tau: engine.denoise_step(x, tau, cache)  # noqa: E731
    return sampler.sample(step, noise, guidance_target=target, guidance_delay=3, shared_time=True).actions


def test_rtc_runs_on_the_onnx_engine_as_on_torch(tiny_model, onnx_artifact):
    torch_engine = create_engine("torch", model=tiny_model)
    ort = create_engine("onnxruntime", artifact=onnx_artifact, threads=1)
    want = _guided(torch_engine, tiny_model.config, vjp=False)
    torch.testing.assert_close(_guided(ort, tiny_model.config, vjp=False), want, atol=1e-4, rtol=0)
    with pytest.raises(EngineUnavailable, match="torch engine"):
        _guided(ort, tiny_model.config, vjp=True)
