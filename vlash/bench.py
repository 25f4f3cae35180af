"""`vlash bench`: latency of prefill, one denoise step, time to first action and the full chunk.

Every run: synchronize, clock, prefill, then the flow sampler streaming final actions. TTFA is the
time from the observation entering prefill to the first final action (after one step with the
horizon-aware schedule, after all N with the constant one). Medians and p99 over `iters` runs after
`warmup` untimed runs; warm-up time is reported separately.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from engines.base import Engine
from vlash.errors import ConfigError
from vlash.policies.pi05.examples import random_inputs
from vlash.sampling import FlowSampler, SamplerConfig

METRICS = ("prefill_ms", "step_ms", "ttfa_ms", "chunk_ms")


@dataclass(frozen=True)
class BenchSettings:
    schedule: str = "constant"  # "constant" or "horizon-aware"
    steps: int = 10  # Euler steps per chunk
    iters: int = 20  # timed runs
    warmup: int = 3  # untimed runs before timing
    batch: int = 1  # observations per call

    def __post_init__(self) -> None:
        for name in ("steps", "iters", "batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"bench {name} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ConfigError(f"bench warmup must be >= 0, got {self.warmup}")


@dataclass
class BenchReport:
    settings: BenchSettings
    engine: dict
    warmup_s: float
    samples: dict[str, list[float]] = field(default_factory=dict)  # metric -> per-run values (ms)

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            m: {"median": statistics.median(v), "p99": float(np.percentile(v, 99)), "n": len(v)}
            for m, v in self.samples.items()
        }

    def to_dict(self) -> dict:
        return {
            "settings": asdict(self.settings),
            "engine": self.engine,
            "warmup_s": self.warmup_s,
            "summary": self.summary(),
        }


def _one_run(engine: Engine, sampler: FlowSampler, settings: BenchSettings, seed: int) -> dict[str, list[float]]:
    cfg = engine.config
    inputs = random_inputs(cfg, batch=settings.batch, seed=seed, device=engine.device)
    noise = torch.randn(settings.batch, cfg.action_horizon, cfg.action_dim, device=engine.device)
    engine.synchronize()
    t0 = time.perf_counter()
    cache = engine.prefill(inputs)
    engine.synchronize()
    t_prefill = time.perf_counter()
    run = sampler.start(lambda x, tau: engine.denoise_step(x, tau, cache), noise, synchronize=engine.synchronize)
    ttfa = None
    for _ in run:
        if ttfa is None:
            ttfa = time.perf_counter() - t0
    t_end = time.perf_counter()
    return {
        "prefill_ms": [(t_prefill - t0) * 1e3],
        "step_ms": [s * 1e3 for s in run.result.step_times_s],
        "ttfa_ms": [(ttfa if ttfa is not None else t_end - t0) * 1e3],
        "chunk_ms": [(t_end - t0) * 1e3],
    }


@torch.no_grad()
def run_bench(engine: Engine, settings: BenchSettings, progress=None) -> BenchReport:
    """Time `engine` end to end; `progress(i, total)` is called after every run if given."""
    sampler = FlowSampler(SamplerConfig(num_steps=settings.steps, schedule=settings.schedule))
    total = settings.warmup + settings.iters
    t0 = time.perf_counter()
    for i in range(settings.warmup):
        _one_run(engine, sampler, settings, seed=i)
        if progress:
            progress(i + 1, total)
    report = BenchReport(settings, engine.describe(), warmup_s=time.perf_counter() - t0)
    report.samples = {m: [] for m in METRICS}
    for i in range(settings.iters):
        for metric, values in _one_run(engine, sampler, settings, seed=settings.warmup + i).items():
            report.samples[metric].extend(values)
        if progress:
            progress(settings.warmup + i + 1, total)
    return report
