"""Normalization stats of a dataset: QUANTILES (q01 / q99 -> [-1, 1]) for state and action, as pi0.5."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vlash.policies.processing.normalization import FeatureNorm, Normalizer, NormMode
from vlash.train.episodes import Episode
from vlash.train.errors import DatasetError

STATE_KEY = "observation.state"
ACTION_KEY = "action"


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """mean / std / min / max / q01 / q99 per column of `values` [N, D], float32."""
    if values.ndim != 2 or len(values) == 0:
        raise DatasetError(f"stats need a non-empty [N, D] array, got shape {values.shape}")
    x = values.astype(np.float64)
    q01, q99 = np.quantile(x, [0.01, 0.99], axis=0)
    stats = {"mean": x.mean(0), "std": x.std(0), "min": x.min(0), "max": x.max(0), "q01": q01, "q99": q99}
    return {k: v.astype(np.float32) for k, v in stats.items()}


def relative_chunks(episode: Episode, horizon: int) -> np.ndarray:
    """[n, J]: every `labels[t + k] - states[t]` with 0 <= k < horizon inside the episode's labels (its actions
    and tail: what a relative policy predicts); with plans, every `plans[t][k] - states[t]` (the state's joints)."""
    chunks, real = episode.chunk_labels(horizon)
    return (chunks - episode.joint_states[:, None, :])[real]


def dataset_normalizer(
    episodes: Sequence[Episode], relative_horizon: int = 0, action_mode: NormMode = NormMode.QUANTILES
) -> Normalizer:
    """A Normalizer with "observation.state" (observed states, every entry, QUANTILES) and "action" stats
    (`action_mode`): of the labels (commanded targets and tails, or the per-frame plans' targets when the episodes
    have them), or with `relative_horizon` H > 0 of the labels relative to the state over H-action chunks."""
    if not episodes:
        raise DatasetError("no episodes to compute normalization stats from")
    states = np.concatenate([e.states for e in episodes])
    if relative_horizon > 0:
        actions = np.concatenate([relative_chunks(e, relative_horizon) for e in episodes])
    else:
        actions = np.concatenate([e.labels if e.plans is None else e.plans.reshape(-1, e.num_joints) for e in episodes])
    return Normalizer(
        [
            FeatureNorm(STATE_KEY, NormMode.QUANTILES, feature_stats(states)),
            FeatureNorm(ACTION_KEY, NormMode(action_mode), feature_stats(actions)),
        ]
    )
