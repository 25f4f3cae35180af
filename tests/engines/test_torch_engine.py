"""The engine registry and the torch engine (eager and torch.compile'd on CPU)."""

from __future__ import annotations

import pytest
import torch

from vlash.engines import available_engines, create_engine
from vlash.errors import ConfigError
from vlash.policies.checkpoint import build_random
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.examples import random_inputs


@pytest.fixture(scope="module")
def tiny():
    return build_random(load_preset("pi05-tiny"), seed=2)


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
    assert compiled.describe()["compile"] == "default" and eager.describe()["compile"] == "eager"


def test_engine_rejects_bad_compile_mode(tiny):
    with pytest.raises(ConfigError, match="compile_mode"):
        create_engine("torch", model=tiny, compile_mode="turbo")


def test_warmup_runs_on_synthetic_inputs(tiny):
    engine = create_engine("torch", model=tiny)
    with torch.no_grad():
        engine.warmup(batch_size=2, steps=1)
