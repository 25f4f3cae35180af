"""Intervals for evaluation results: Wilson for success rates, a seeded bootstrap for means and paired ratios."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 0  # fixed: the same episodes always give the same interval


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval of a success rate (Wilson score)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap_mean(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(mean, low, high): the mean and its 95% percentile-bootstrap interval; None without values."""
    x = np.asarray(values, np.float64)
    if not len(x):
        return None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = x[rng.integers(0, len(x), (BOOTSTRAP_SAMPLES, len(x)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(x.mean()), float(low), float(high)


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(ratio, low, high): mean(a) / mean(b) over paired episodes (same seeds, same order) and its 95% interval,
    resampling pairs together so the seeds' shared difficulty cancels."""
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(x) != len(y) or not len(x):
        raise ValueError(f"paired_ratio needs two equally long non-empty samples, got {len(x)} and {len(y)}")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, len(x), (BOOTSTRAP_SAMPLES, len(x)))
    ratios = x[idx].mean(axis=1) / y[idx].mean(axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(x.mean() / y.mean()), float(low), float(high)
