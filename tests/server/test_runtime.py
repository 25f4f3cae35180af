"""PolicyRuntime: one request -> a stream of final actions, the same chunk the evaluation harness gets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from msgspec.structs import replace

from robot_io.protocol import Infer
from tests.server.conftest import PROMPT, STEPS, image, make_runtime, write_policy
from vlash.eval.policies import LearnedPolicy
from vlash.policies.formats.loading import load_policy
from vlash.policies.processing.processor import Observation
from vlash.policies.processing.task_space import PlanarArmTaskSpace, PlanarArmVelocityTaskSpace
from vlash.runtime.policy_runtime import PolicyRuntime, make_infer
from vlash.sampling import FlowSampler, GuidanceConfig, SamplerConfig

STATE = np.array([0.5, 1.25], np.float32)
# the simulator's planar arm (vlash.sim ArmConfig), planning end-effector velocities
ARM_VELOCITY = PlanarArmVelocityTaskSpace(PlanarArmTaskSpace((0.5, 0.4), ((-6.3, 6.3), (-2.8, 2.8))), 1 / 30)


@pytest.fixture(scope="module")
def runtime(policy_dir) -> PolicyRuntime:
    return make_runtime(policy_dir)


@pytest.fixture(scope="module")
def relative_runtime(relative_policy_dir) -> PolicyRuntime:
    return make_runtime(relative_policy_dir)


def _request(runtime: PolicyRuntime, **kw) -> Infer:
    cam = runtime.config.camera_names[0]
    return make_infer({cam: image(runtime)}, STATE, PROMPT, **({"seed": 7} | kw))


def _stream(runtime: PolicyRuntime, request: Infer):
    *pieces, done = runtime.stream([request])
    assert done.done and not any(piece.done for piece in pieces)
    return pieces, done.result


@pytest.mark.parametrize("schedule", ["constant", "horizon-aware"])
def test_committed_prefix_comes_back_bit_exact_and_is_not_streamed(runtime, schedule):
    prefix = np.array([[0.1, 0.7], [0.2, 0.3], [1e-7, 2.9999998]], np.float32)  # no exact normalize round trip
    pieces, result = _stream(runtime, _request(runtime, prefix=prefix, schedule=schedule))
    assert result.actions.dtype == np.float32 and result.actions.shape == (runtime.horizon, 2)
    assert result.actions[:3].tobytes() == prefix.tobytes()
    assert pieces[0].start == 3 and (result.final_at_step[:3] == -2).all()


def test_streamed_pieces_are_contiguous_and_equal_the_final_chunk(runtime):
    pieces, result = _stream(runtime, _request(runtime, schedule="horizon-aware"))
    assert pieces[0].start == 0 and pieces[0].step == 0  # the first action is final after one step
    assert len(pieces) > 2
    stop = 0
    for piece in pieces:
        assert piece.start == stop
        np.testing.assert_array_equal(result.actions[piece.start : piece.start + len(piece.actions)], piece.actions)
        stop = piece.start + len(piece.actions)
    assert stop == runtime.horizon


def test_constant_schedule_finishes_everything_at_the_last_step(runtime):
    pieces, _ = _stream(runtime, _request(runtime))
    assert [(p.start, len(p.actions), p.step) for p in pieces] == [(0, runtime.horizon, STEPS - 1)]


def test_timing_breakdown_is_complete(runtime):
    _, result = _stream(runtime, _request(runtime, schedule="horizon-aware"))
    keys = {"preprocess_ms", "prefill_ms", "postprocess_ms", "first_action_ms", "total_ms"}
    assert set(result.timing_ms) == keys and all(v >= 0 for v in result.timing_ms.values())
    assert len(result.step_ms) == STEPS == result.num_steps
    t = result.timing_ms
    assert t["total_ms"] >= t["prefill_ms"] + sum(result.step_ms)
    assert t["prefill_ms"] + result.step_ms[0] <= t["first_action_ms"] <= t["total_ms"]


def test_seed_makes_requests_repeatable(runtime):
    a = runtime.run(_request(runtime)).actions
    np.testing.assert_array_equal(a, runtime.run(_request(runtime)).actions)
    assert not np.array_equal(a, runtime.run(_request(runtime, seed=8)).actions)
    unseeded = [runtime.run(_request(runtime, seed=None)) for _ in range(2)]
    assert unseeded[0].seed != unseeded[1].seed
    np.testing.assert_array_equal(runtime.run(_request(runtime, seed=unseeded[0].seed)).actions, unseeded[0].actions)


def test_relative_policy_returns_absolute_actions_from_the_planning_state(runtime, relative_runtime):
    """Same weights and stats: the relative policy's chunk is the absolute one's shifted by the planning state."""
    future = np.array([1.5, 0.25], np.float32)
    absolute = runtime.run(_request(runtime, future_state=future)).actions
    relative = relative_runtime.run(_request(relative_runtime, future_state=future)).actions
    np.testing.assert_allclose(relative, absolute + future, atol=1e-5)
    assert not np.allclose(relative, absolute + STATE, atol=1e-3)  # planned from the future state, not `state`


def _reference_plan(policy, infer: Infer, num_steps: int) -> np.ndarray:
    """The evaluation harness's request -> chunk path as it was before it moved to PolicyRuntime."""
    cfg, proc = policy.config, policy.processor

    def model_actions(actions):
        padded = np.zeros((len(actions), cfg.action_dim), np.float32)
        padded[:, :2] = proc.to_model_actions(actions, infer.state)
        return torch.from_numpy(padded)[None]

    obs = Observation(images=infer.images, state=infer.state, prompt=infer.prompt)
    with torch.no_grad():
        cache = policy.model.prefill(proc.preprocess([obs]))
    noise = torch.randn(1, cfg.action_horizon, cfg.action_dim, generator=torch.Generator().manual_seed(infer.seed))
    kwargs, guidance = {}, None
    if infer.guidance is not None:
        guidance = GuidanceConfig(execution_horizon=infer.execution_horizon, max_weight=5.0)
        kwargs = {"guidance_target": model_actions(infer.guidance), "guidance_delay": infer.delay_steps}
    if infer.prefix is not None:
        kwargs["prefix"] = model_actions(infer.prefix)
    schedule = infer.schedule or "constant"
    sampler = FlowSampler(SamplerConfig(num_steps=num_steps, schedule=schedule, guidance=guidance))
    step = lambda x, tau: policy.model.denoise_step(x, tau, cache)  # noqa: E731
    result = sampler.sample(step, noise, shared_time=True, **kwargs)  # as the runtime runs every engine
    actions = proc.postprocess(result.actions, infer.state[None])[0]
    if infer.prefix is not None:
        actions[: len(infer.prefix)] = infer.prefix
    return actions.astype(np.float32)


def test_a_learned_policy_goes_through_the_runtime_and_matches_the_old_path(relative_policy_dir):
    learned = LearnedPolicy(load_policy(relative_policy_dir), num_steps=STEPS)
    plan = learned.planner(None, None, 1)  # the model needs neither the simulator nor the commanded action
    images = {learned.camera: image(learned.runtime)}
    base = Infer(1, 0, 0, PROMPT, images, STATE, seed=3)
    target = np.tile(np.array([[2.0, 1.0]], np.float32), (learned.horizon, 1))
    requests = [
        base,
        replace(base, schedule="horizon-aware", prefix=np.array([[0.4, 0.6], [0.5, 0.7]], np.float32)),
        replace(base, guidance=target, delay_steps=2, execution_horizon=10),
    ]
    for infer in requests:
        expected = _reference_plan(learned.policy, infer, STEPS)
        np.testing.assert_array_equal(plan(infer).actions, expected)


@pytest.fixture(scope="module")
def velocity_runtime(tmp_path_factory) -> PolicyRuntime:
    return make_runtime(write_policy(tmp_path_factory.mktemp("velocity"), transform=ARM_VELOCITY))


@pytest.mark.parametrize("schedule", ["constant", "horizon-aware"])
def test_rows_after_a_prefix_run_from_where_the_prefix_leaves_a_velocity_task_space_policy(velocity_runtime, schedule):
    """A policy planning end-effector velocities maps row i to joint velocities at the state rows [0, i) lead to:
    the chunk is the whole model chunk converted from the planning state, the committed prefix included, whether its
    rows come as one piece (constant) or several (horizon-aware). Each piece converted on its own from the planning
    state (before issue 44) is rows off by up to 25 rad/s here, and cost hold's learned `prefix` mode most of its
    success."""
    prefix = np.tile(np.array([[2.0, -1.5]], np.float32), (4, 1))  # 0.27 / -0.2 rad before the model's first row
    infer = _request(velocity_runtime, prefix=prefix, schedule=schedule, seed=3)
    pieces, result = _stream(velocity_runtime, infer)
    assert len(pieces) == 1 if schedule == "constant" else len(pieces) > 2
    expected = _reference_plan(velocity_runtime.policy, infer, STEPS)
    np.testing.assert_allclose(result.actions, expected, rtol=0, atol=1e-4)
    assert result.actions[:4].tobytes() == prefix.tobytes()


def test_the_runtime_runs_an_infer_as_it_is_and_an_empty_prefix_is_no_prefix(runtime):
    """The runtime's request is the INFER itself (no copy into another type): an empty prefix plans as none."""
    whole = runtime.run(_request(runtime, schedule="horizon-aware", execution_horizon=5))
    empty = _request(runtime, schedule="horizon-aware", execution_horizon=5, prefix=np.zeros((0, 2), np.float32))
    assert runtime.rows_needed(empty) == 5
    result = runtime.run(empty)
    assert (
        result.actions.tobytes() == whole.actions.tobytes() and result.final_rows == whole.final_rows < runtime.horizon
    )
    assert (result.final_at_step != -2).all()  # no row is a prefix row
