"""What the tools that time vlash beside another implementation share (tools/bench_vs_openpi.py,
tools/bench_vs_lerobot.py): the agreement gate before timing, interleaved rotating rounds, the bootstrap interval
of a median, and the JSON written atomically."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vlash.atomic import atomic_write

SEED = 0
Chunk = Callable[[], object]


class Disagreement(RuntimeError):
    """An engine's actions are farther from the reference's than the tolerance (or not finite)."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def agreement(actions: dict[str, np.ndarray], reference: str, tolerance: float) -> dict[str, float]:
    """max |diff| of every engine's actions from the reference's; raises Disagreement past `tolerance` (NaN too)."""
    ref = actions[reference]
    diffs = {}
    for name, a in actions.items():
        if a.shape != ref.shape:
            raise Disagreement(f"{name} returned actions of shape {a.shape}, {reference} {ref.shape}")
        diffs[name] = float(np.max(np.abs(a.astype(np.float64) - ref))) if a.size else 0.0
    bad = {n: d for n, d in diffs.items() if not d <= tolerance}  # `not <=`: NaN fails
    if bad:
        text = ", ".join(f"{n} max|diff| {d:.3g}" for n, d in bad.items())
        raise Disagreement(f"actions disagree with {reference} beyond {tolerance:g}: {text}; not timing")
    return diffs


def interleaved(
    chunks: dict[str, Chunk], rounds: int, warmup: int, log: Callable[[str], None] = _stderr
) -> dict[str, list[float]]:
    """Per-chunk milliseconds of every engine: `warmup` untimed each, then `rounds` rounds, order rotating."""
    names = list(chunks)
    for i in range(warmup):
        for name in names:
            chunks[name]()
        log(f"warm-up {i + 1}/{warmup}")
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter()
            chunks[name]()
            times[name].append((time.perf_counter() - start) * 1e3)
        log(f"round {r + 1}/{rounds}: " + ", ".join(f"{n} {times[n][-1]:.1f} ms" for n in names))
    return times


def median_interval(values: list[float], resamples: int = 2000, seed: int = SEED) -> tuple[float, float, float]:
    """(median, bootstrap 2.5th and 97.5th percentiles of the median)."""
    v = np.asarray(values, dtype=np.float64)
    boot = np.median(np.random.default_rng(seed).choice(v, (resamples, v.size)), axis=1)
    return float(np.median(v)), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))


def write_json(path: Path, doc: dict) -> None:
    text = json.dumps(doc, indent=2) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, "a / b / c"."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())
