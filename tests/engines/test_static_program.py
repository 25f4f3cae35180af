"""The torch engine's static programs (`graphs="chunk"` / `"step"`, engines.static_program): the prefill and the
denoise spans run from static buffers, which a GPU captures as CUDA graphs. On the CPU they run uncaptured, and must
give the dynamic path's chunks (same noise), compile with no graph break, and be refused by `vlash serve` on a CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from msgspec.structs import replace

from robot_io.protocol import Infer
from tests.torch_threads import torch_threads
from vlash.engines import create_engine
from vlash.engines.static_program import prefill_function, span_function
from vlash.errors import ConfigError
from vlash.policies.formats.random_policy import random_policy
from vlash.policies.pi05.examples import random_inputs
from vlash.runtime.policy_runtime import ChunkResult, PolicyRuntime, make_infer
from vlash.sampling.span import StepSpan

STEPS = 4
ATOL = 1e-5
PREFIX = np.array([[0.1, 0.7], [-0.2, 0.3]], np.float32)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module", params=[1, 2], ids=["1cam", "2cam"])
def policy(request):
    return random_policy("pi05-tiny", seed=3, cameras=request.param)


def _requests(runtime: PolicyRuntime, count: int) -> list[Infer]:
    """Constant; horizon-aware with a prefix; horizon-aware with an early stop; constant again (batch 4: all)."""
    size = runtime.config.vision.image_size
    kinds = [{}, {"schedule": "horizon-aware", "prefix": PREFIX}, {"schedule": "horizon-aware", "execution_horizon": 5}]
    requests = []
    for i in range(count):
        rng = np.random.default_rng(i)
        images = {name: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for name in runtime.config.camera_names}
        state = np.array([0.3 * i - 0.4, 0.2], np.float32)
        requests.append(make_infer(images, state, "go to the goal", seed=10 + i, **kinds[i % len(kinds)]))
    return requests


def _same(got: ChunkResult, want: ChunkResult) -> None:
    assert isinstance(got, ChunkResult), got
    assert (got.final_rows, got.num_steps) == (want.final_rows, want.num_steps)
    np.testing.assert_array_equal(got.final_at_step, want.final_at_step)
    np.testing.assert_allclose(got.actions[: got.final_rows], want.actions[: want.final_rows], atol=ATOL, rtol=0)


@pytest.mark.parametrize("graphs", ["chunk", "step"])
@pytest.mark.parametrize("batch", [1, 4])
def test_static_programs_give_the_dynamic_chunks(policy, graphs, batch):
    dynamic = PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=STEPS)
    engine = create_engine("torch", model=policy.model, graphs=graphs)
    static = PolicyRuntime(policy, engine, num_steps=STEPS)
    requests = _requests(dynamic, batch)
    want = dynamic.run_batch(requests)
    for _ in range(2):  # the second run replays the programs the first one built, on new values
        for got, expected in zip(static.run_batch(requests), want, strict=True):
            _same(got, expected)
        requests = [replace(r, seed=r.seed + 100) for r in requests]
        want = dynamic.run_batch(requests)
    assert not engine.can_shrink_batch and engine.span_granularity == graphs
    assert "static programs, not captured" in engine.describe()["compile"]
    if graphs == "step":  # one program per (batch, shared time, prefix held): reused for every step
        assert all("steps=1" in name for name in engine._programs.programs if name.startswith("span"))


def test_a_chunk_is_one_span_per_report(policy):
    """Constant schedule: the N steps in one span; horizon-aware: step 0 (the first actions), then the rest."""
    engine = create_engine("torch", model=policy.model, graphs="chunk")
    runtime = PolicyRuntime(policy, engine, num_steps=STEPS)
    seen = []
    run_span = engine.denoise_span
    engine.denoise_span = lambda span, cache: seen.append(span.steps) or run_span(span, cache)
    constant, horizon_aware = _requests(runtime, 2)
    runtime.run(constant)
    assert seen == [STEPS]
    seen.clear()
    pieces = list(runtime.stream([horizon_aware]))
    assert seen == [1, STEPS - 1]
    assert pieces[0].step == 0 and pieces[0].start == len(PREFIX)  # streamed after the first span alone


def test_guided_rtc_runs_step_by_step_on_a_static_engine(policy):
    dynamic = PolicyRuntime(policy, create_engine("torch", model=policy.model), num_steps=STEPS)
    static = PolicyRuntime(policy, create_engine("torch", model=policy.model, graphs="chunk"), num_steps=STEPS)
    guidance = np.random.default_rng(5).normal(0.0, 0.5, (30, 2)).astype(np.float32)
    request = replace(_requests(dynamic, 1)[0], guidance=guidance, delay_steps=2, execution_horizon=10)
    _same(static.run(request), dynamic.run(request))


def test_the_programs_compile_as_one_graph_each():
    """torch.compile(fullgraph=True) raises on any graph break; the eager backend traces without building kernels."""
    policy = random_policy("pi05-tiny", seed=3, cameras=2)
    model, cfg = policy.model, policy.model.config
    inputs = random_inputs(cfg, batch=2, seed=1)
    fields = (inputs.images, inputs.image_masks, inputs.tokens, inputs.token_masks)
    cache_fields = torch.compile(prefill_function(model), fullgraph=True, backend="eager", dynamic=False)(*fields)
    x = torch.randn(2, cfg.action_horizon, cfg.action_dim)
    taus = torch.rand(3, 2, cfg.action_horizon)
    dtaus = -taus / 3
    mask = torch.zeros(2, cfg.action_horizon, dtype=torch.bool)
    mask[:, :2] = True
    values = torch.randn_like(x)
    for shared, held in (((True, False, False), True), ((True, True, True), False)):
        span = span_function(model, shared, held)
        got = torch.compile(span, fullgraph=True, backend="eager", dynamic=False)(
            x, taus, dtaus, mask, values, *cache_fields
        )
        torch.testing.assert_close(got, span(x, taus, dtaus, mask, values, *cache_fields))
    cache = model.prefill(inputs)
    want = StepSpan(0, x, taus, dtaus, (True, False, False), (mask, values)).run(
        lambda x_t, tau: model.denoise_step(x_t, tau, cache)
    )
    torch.testing.assert_close(
        span_function(model, (True, False, False), True)(x, taus, dtaus, mask, values, *cache_fields), want
    )


def test_engine_options_are_checked(policy):
    with pytest.raises(ConfigError, match="graphs must be"):
        create_engine("torch", model=policy.model, graphs="whole")
    with pytest.raises(ConfigError, match="reduce-overhead"):
        create_engine("torch", model=policy.model, graphs="chunk", compile_mode="reduce-overhead")
