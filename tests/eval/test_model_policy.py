"""The trained-model side of the harness: a (random) pi0.5 policy directory answers every request kind."""

from __future__ import annotations

import numpy as np
import pytest

from tests.eval.fake_env import RampEnv
from tests.policies.builders import train_wordlevel_tokenizer
from vlash.eval.episode import EpisodeRunner
from vlash.eval.modes import ExecutionConfig
from vlash.eval.policies import ModelPolicy
from vlash.eval.requests import GuidanceRequest, PlanRequest
from vlash.policies.checkpoint import build_random
from vlash.policies.normalization import FeatureNorm, Normalizer, NormMode
from vlash.policies.pi05 import load_preset
from vlash.policies.policy_dir import load_policy, save_policy


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
    return ModelPolicy(load_policy(root / "p"), num_steps=3)


def _request(**kw) -> PlanRequest:
    image = np.random.default_rng(0).integers(0, 255, (96, 96, 3), dtype=np.uint8)
    return PlanRequest(image=image, state=np.array([0.5], np.float32), instruction="go to the goal", **kw)


def test_plans_are_deterministic_per_seed(policy):
    a = policy.plan(_request(seed=1)).actions
    assert a.shape == (50, 1) and np.isfinite(a).all()
    np.testing.assert_array_equal(a, policy.plan(_request(seed=1)).actions)
    assert not np.array_equal(a, policy.plan(_request(seed=2)).actions)


def test_prefix_is_kept_bit_exactly_with_horizon_aware_sampling(policy):
    prefix = np.array([[0.1], [0.2], [0.3]], np.float32)
    result = policy.plan(_request(prefix=prefix, schedule="horizon-aware"))
    np.testing.assert_array_equal(result.actions[:3], prefix)
    assert (result.final_at_step[:3] == -2).all() and result.final_at_step[3] == 0


def test_guided_request_runs_and_moves_toward_the_target(policy):
    target = np.full((50, 1), 3.0, np.float32)
    free = policy.plan(_request()).actions
    guided = policy.plan(_request(guidance=GuidanceRequest(target, delay=3, execution_horizon=10))).actions
    assert np.abs(guided[:20] - 3.0).mean() < np.abs(free[:20] - 3.0).mean()


def test_model_policy_drives_an_episode_in_every_mode(policy):
    for mode in ("sync", "naive", "vlash", "rtc", "prefix", "faster", "ensemble"):
        env = RampEnv(max_steps=30)
        trace = EpisodeRunner(env, policy, ExecutionConfig(mode, 2, execution_horizon=8, ensemble_every=4)).run(0)
        assert trace.steps == 30 and np.isfinite(np.stack(trace.commands)).all(), mode
