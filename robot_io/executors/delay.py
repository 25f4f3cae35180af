"""Online estimate of the inference delay d in control steps: a high percentile of recent latencies."""

from __future__ import annotations

import math
from collections import deque

import numpy as np


class DelayEstimator:
    """d = ceil(p-th percentile of the last `window` latencies / period), clamped to [0, max_delay].

    Latencies are measured from the start of the request's control tick (the observation time) to the
    arrival of what the switch needs, so a reply with latency L is usable at tick request + ceil(L / period).
    """

    def __init__(self, period_s: float, initial: int, window: int = 20, percentile: float = 95.0, adapt: bool = True):
        if not period_s > 0:
            raise ValueError(f"DelayEstimator.period_s must be > 0, got {period_s}")
        self.period_s, self.initial, self.percentile, self.adapt = period_s, initial, percentile, adapt
        self._samples: deque[float] = deque(maxlen=window)
        self._latency_s: float | None = None  # the percentile, recomputed per sample (not per control tick)
        self.clamped = 0  # estimates that exceeded max_delay and were clamped

    def add(self, latency_s: float) -> None:
        self._samples.append(float(latency_s))
        self._latency_s = float(np.percentile(self._samples, self.percentile))

    @property
    def samples(self) -> list[float]:
        return list(self._samples)

    def latency_s(self) -> float | None:
        """The percentile of the recent latencies (None before the first)."""
        return self._latency_s

    def steps(self, max_delay: int) -> int:
        """The current d in control steps."""
        latency = self.latency_s()
        raw = self.initial if latency is None or not self.adapt else math.ceil(latency / self.period_s - 1e-9)
        if raw > max_delay:
            self.clamped += 1
        return max(0, min(raw, max_delay))  # 0 only for a link that answers within the tick (simulated)
