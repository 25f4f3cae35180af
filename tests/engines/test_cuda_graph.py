"""The CUDA-graph denoise step of the torch engine (needs a GPU; skipped elsewhere) and its CPU-side checks."""

from __future__ import annotations

import pytest
import torch

from vlash.engines import create_engine
from vlash.errors import ConfigError
from vlash.policies.checkpoint import build_random
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.examples import random_inputs


def test_cuda_graphs_need_a_cuda_model():
    with pytest.raises(ConfigError, match="CUDA device"):
        create_engine("torch", model=build_random(load_preset("pi05-tiny")), cuda_graphs=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_graph_replay_matches_eager_and_follows_new_caches(dtype):
    model = build_random(load_preset("pi05-tiny"), seed=2, dtype=dtype, device="cuda")
    eager = create_engine("torch", model=model)
    graphed = create_engine("torch", model=model, cuda_graphs=True)
    cfg = model.config
    tol = 1e-5 if dtype == "fp32" else 2e-2
    with torch.no_grad():
        for seed in (1, 2):  # the second prefill must be copied into the static cache
            cache = eager.prefill(random_inputs(cfg, seed=seed, device="cuda"))
            for step in range(3):
                x = torch.randn(1, cfg.action_horizon, cfg.action_dim, device="cuda")
                tau = torch.full((1, cfg.action_horizon), 1.0 - 0.3 * step, device="cuda")
                want = eager.denoise_step(x, tau, cache)
                got = graphed.denoise_step(x, tau, cache)
                torch.testing.assert_close(got, want, atol=tol, rtol=tol)
        cache2 = eager.prefill(random_inputs(cfg, batch=2, device="cuda"))  # a second batch size: a second graph
        x2 = torch.randn(2, cfg.action_horizon, cfg.action_dim, device="cuda")
        tau2 = torch.rand(2, cfg.action_horizon, device="cuda")
        torch.testing.assert_close(
            graphed.denoise_step(x2, tau2, cache2), eager.denoise_step(x2, tau2, cache2), atol=tol, rtol=tol
        )
    assert len(graphed._step.graphs) == 2
    assert "cuda graph" in graphed.describe()["compile"]
