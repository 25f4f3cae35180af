"""Feature statistics as LeRobot 0.6.1 keeps them (datasets/compute_stats.py): per episode min, max, mean, std,
count and the quantiles q01 q10 q50 q90 q99 of every numeric feature (per entry) and every camera (per channel, in
[0, 1], shaped (3, 1, 1)); a dataset's are the episodes' aggregated (compute_stats.aggregate_stats: count-weighted
mean, pooled variance, quantiles averaged with count weights). lerobot-train normalizes with them.

Differences, on purpose: an episode's quantiles are exact here (numpy over its frames; LeRobot estimates them from
histograms), and a camera's come from every frame's pixels in an exact 256-bin histogram per channel (LeRobot
samples frames), downsampled by PIXEL_STRIDE in each direction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
PIXEL_STRIDE = 4  # every 4th pixel of every 4th row: plenty for per-channel statistics


def vector_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """[N] or [N, D] values of one feature over an episode -> each statistic per entry ([1] or [D]; count [1])."""
    x = np.asarray(values, np.float64)
    x = x[:, None] if x.ndim == 1 else x
    stats = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": np.array([len(x)])}
    stats.update({name: np.quantile(x, q, axis=0) for name, q in QUANTILES.items()})
    return stats


class ImageStats:
    """Per-channel statistics of one camera's frames over an episode, from a 256-bin histogram per channel."""

    def __init__(self) -> None:
        self.frames = 0
        self.histogram = np.zeros((3, 256), np.int64)

    def add(self, frame: np.ndarray) -> None:
        """One uint8 [H, W, 3] frame."""
        pixels = frame[::PIXEL_STRIDE, ::PIXEL_STRIDE].reshape(-1, 3)
        for c in range(3):
            self.histogram[c] += np.bincount(pixels[:, c], minlength=256)
        self.frames += 1

    def stats(self) -> dict[str, np.ndarray]:
        """Each statistic per channel in [0, 1], shaped (3, 1, 1); count: the frames, [1]."""
        levels = np.arange(256) / 255.0
        h = self.histogram.astype(np.float64)
        n = h.sum(1)
        mean = h @ levels / n
        std = np.sqrt(np.maximum(h @ levels**2 / n - mean**2, 0.0))
        cdf = np.cumsum(h, 1) / n[:, None]
        seen = h > 0
        stats = {
            "min": levels[seen.argmax(1)],
            "max": levels[255 - seen[:, ::-1].argmax(1)],
            "mean": mean,
            "std": std,
            **{name: levels[(cdf < q).sum(1)] for name, q in QUANTILES.items()},
        }
        stats = {k: v.reshape(3, 1, 1) for k, v in stats.items()}
        stats["count"] = np.array([self.frames])
        return stats


def aggregate(episodes: Iterable[Mapping[str, Mapping[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Several episodes' (or datasets') statistics as one, feature by feature (compute_stats.aggregate_stats)."""
    per_feature: dict[str, list[Mapping[str, np.ndarray]]] = {}
    for stats in episodes:
        for feature, values in stats.items():
            per_feature.setdefault(feature, []).append(values)
    out = {}
    for feature, parts in per_feature.items():
        counts = np.array([float(p["count"][0]) for p in parts])
        total = counts.sum()
        w = (counts / total).reshape((-1,) + (1,) * np.ndim(parts[0]["mean"]))
        means = np.stack([p["mean"] for p in parts])
        mean = (w * means).sum(0)
        variance = (w * (np.stack([p["std"] for p in parts]) ** 2 + (means - mean) ** 2)).sum(0)
        merged = {
            "min": np.min(np.stack([p["min"] for p in parts]), 0),
            "max": np.max(np.stack([p["max"] for p in parts]), 0),
            "mean": mean,
            "std": np.sqrt(variance),
            "count": np.array([int(total)]),
        }
        merged.update({q: (w * np.stack([p[q] for p in parts])).sum(0) for q in QUANTILES if q in parts[0]})
        out[feature] = merged
    return out


def to_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, list]]:
    """meta/stats.json's shape: feature -> statistic -> nested lists (utils.serialize_dict)."""
    return {f: {k: np.asarray(v).tolist() for k, v in s.items()} for f, s in stats.items()}


def from_json(data: Mapping[str, Mapping[str, list]]) -> dict[str, dict[str, np.ndarray]]:
    """meta/stats.json read back as arrays (io_utils.cast_stats_to_numpy)."""
    return {f: {k: np.atleast_1d(np.array(v)) for k, v in s.items()} for f, s in data.items()}
