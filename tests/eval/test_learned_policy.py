"""The trained-model side of the harness: a (random) pi0.5 policy directory answers every request kind the executors
send, with the finality the oracle's simulated link assumes."""

from __future__ import annotations

import numpy as np
import pytest

from robot_io.executors import EXECUTION_MODES, ExecutorConfig
from robot_io.protocol import Infer
from tests.eval.fake_env import RampEnv, RecordingPolicy
from tests.policies.builders import train_wordlevel_tokenizer
from vlash.eval.episode import EpisodeRunner
from vlash.eval.link import NOT_FINAL_ROW, PREFIX_ROW, LinkTiming, oracle_result
from vlash.eval.policies import LearnedPolicy
from vlash.policies.formats.loading import load_policy
from vlash.policies.formats.vlash_dir import save_policy
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random
from vlash.policies.processing.normalization import FeatureNorm, Normalizer, NormMode


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy")
    tok = train_wordlevel_tokenizer(root / "tok")
    q = {"q01": np.array([-1.0], np.float32), "q99": np.array([4.0], np.float32)}
    norm = Normalizer(
        [FeatureNorm("observation.state", NormMode.QUANTILES, q), FeatureNorm("action", NormMode.QUANTILES, q)]
    )
    model = build_random(load_preset("pi05-tiny"), seed=4)
    save_policy(root / "p", model, norm, tok / "tokenizer.json", action_dims=1, state_dims=1)
    return LearnedPolicy(load_policy(root / "p"), num_steps=3)


def _infer(**fields) -> Infer:
    image = np.random.default_rng(0).integers(0, 255, (96, 96, 3), dtype=np.uint8)
    fields = {"state": np.array([0.5], np.float32), **fields}
    return Infer(request_id=1, step_index=0, capture_time_ns=0, prompt="go to the goal",
                 images={"base_0_rgb": image}, **fields)  # fmt: skip


@pytest.fixture(scope="module")
def plan(policy):
    return policy.planner(RampEnv(), lambda step: None, 1)


def test_plans_are_deterministic_per_seed(plan):
    a = plan(_infer(seed=1)).actions
    assert a.shape == (50, 1) and np.isfinite(a).all()
    np.testing.assert_array_equal(a, plan(_infer(seed=1)).actions)
    assert not np.array_equal(a, plan(_infer(seed=2)).actions)


def test_prefix_is_kept_bit_exactly_with_horizon_aware_sampling(plan):
    prefix = np.array([[0.1], [0.2], [0.3]], np.float32)
    result = plan(_infer(prefix=prefix, schedule="horizon-aware", seed=0))
    np.testing.assert_array_equal(result.actions[:3], prefix)
    assert (result.final_at_step[:3] == PREFIX_ROW).all() and result.final_at_step[3] == 0


def test_guided_request_runs_and_moves_toward_the_target(plan):
    target = np.full((40, 1), 3.0, np.float32)  # the running chunk's leftover: 40 of 50 indices
    free = plan(_infer(seed=0)).actions
    guided = plan(_infer(guidance=target, delay_steps=3, execution_horizon=10, schedule="constant", seed=0)).actions
    assert np.abs(guided[:20] - 3.0).mean() < np.abs(free[:20] - 3.0).mean()


def test_a_horizon_aware_request_with_s_stops_early_and_the_link_sends_only_its_final_rows(plan):
    result = plan(_infer(schedule="horizon-aware", execution_horizon=4, prefix=np.zeros((3, 1), np.float32), seed=0))
    final = result.final_at_step != NOT_FINAL_ROW
    assert result.steps_run < 3 and 7 <= final.sum() < 50 and np.isnan(result.actions[~final]).all()
    planned = LinkTiming(4, num_steps=3).planned(result)
    assert planned.rows == final.sum() and planned.final_fraction < 1.0  # the engine is free sooner


@pytest.mark.parametrize(
    "fields",
    [{}, {"schedule": "horizon-aware"}, {"schedule": "horizon-aware", "execution_horizon": 10},
     {"schedule": "horizon-aware", "execution_horizon": 4, "prefix": np.zeros((3, 1), np.float32)},
     {"schedule": "constant", "execution_horizon": 10, "prefix": np.zeros((2, 1), np.float32)}],
)  # fmt: skip
def test_the_oracles_finality_is_the_models(plan, fields):
    """The oracle's simulated link times rows as the real sampler behind a model finishes them."""
    model = plan(_infer(seed=0, **fields))
    oracle = oracle_result(np.zeros((50, 1), np.float32), _infer(**fields), num_steps=3)
    np.testing.assert_array_equal(oracle.final_at_step, model.final_at_step)
    assert oracle.steps_run == model.steps_run
    final = model.final_at_step != NOT_FINAL_ROW
    assert np.isfinite(model.actions[final]).all()


def test_a_learned_policy_drives_an_episode_in_every_mode(policy):
    for mode in EXECUTION_MODES:
        env, recording = RampEnv(max_steps=30), RecordingPolicy(policy)
        config = ExecutorConfig(mode=mode, execution_horizon=8, ensemble_every=4, initial_delay=1)
        trace = EpisodeRunner(env, recording, config, LinkTiming(2, num_steps=3)).run(0)
        assert trace.steps == 30 and np.isfinite(np.stack(trace.commands)).all(), mode
        assert trace.missed_steps == 0 and len(recording.requests) >= 3, mode
