"""Interleaved A/B timing in one process, for the tools that compare two code paths on this noisy VM."""

from __future__ import annotations

import time
from collections.abc import Callable


def interleaved(a: Callable[[], object], b: Callable[[], object], rounds: int, warmup: int = 3) -> tuple[list, list]:
    """Per-call milliseconds of `a` and of `b`, alternating which goes first, after `warmup` calls each."""
    for _ in range(warmup):
        a(), b()
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(rounds):
        order = ((0, a), (1, b)) if i % 2 else ((1, b), (0, a))
        for slot, fn in order:
            start = time.perf_counter()
            fn()
            times[slot].append((time.perf_counter() - start) * 1e3)
    return times


def p99(values: list[float]) -> float:
    return sorted(values)[int(0.99 * (len(values) - 1))]
