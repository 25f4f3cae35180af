"""`vlash bench`: latency of prefill, one denoise step, time to first action and the full chunk.

Every run: synchronize, clock, prefill, then the flow sampler streaming final actions. TTFA is the
time from the observation entering prefill to the first final action (after one step with the
horizon-aware schedule, after all N with the constant one). Medians and p99 over `iters` runs after
`warmup` untimed runs; warm-up time is reported separately. With a device profile every metric also gets its
roofline floor (vlash.devices.roofline) and measured / floor. Peak memory: CUDA allocator peak on a GPU, the
process's peak resident set on the CPU. What the timings shared the host with (its load average before the first
run, its cores, the engine's threads: robot_io.host_load) goes with them, and a warning when it inflated them.
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from robot_io.host_load import HostLoad, available_cores
from vlash.bench_settings import BenchSettings
from vlash.devices import DeviceProfile, model_floors
from vlash.engines import create_engine
from vlash.engines.base import Engine
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.weights import build_random
from vlash.policies.quantized.schemes import precision_label
from vlash.runtime.loading import check_gate
from vlash.sampling import FlowSampler, SamplerConfig

METRICS = ("prefill_ms", "step_ms", "ttfa_ms", "chunk_ms")


@dataclass
class BenchReport:
    settings: BenchSettings
    engine: dict
    warmup_s: float
    samples: dict[str, list[float]] = field(default_factory=dict)  # metric -> per-run values (ms)
    peak_memory_mb: float = 0.0  # CUDA allocator peak (GPU) or process peak RSS (CPU), MiB
    floors_ms: dict[str, float] = field(default_factory=dict)  # metric -> roofline floor (with a profile)
    profile: str = ""  # device profile the floors come from
    host_rates: dict = field(default_factory=dict)  # on a CPU: the measured rates the floors use (host_rates)
    precision: str = ""  # e.g. "fp32", "int8 (onnx-int8-dynamic) / fp32 activations" (`precision_label`)
    gate: str = ""  # a quantized artifact's recorded fidelity gate, one line ("" when not quantized)
    host: HostLoad | None = None  # the host's load before the first run, its cores and the engine's threads

    def summary(self) -> dict[str, dict[str, float]]:
        rows = {}
        for m, v in self.samples.items():
            row = {"median": statistics.median(v), "p99": float(np.percentile(v, 99)), "n": len(v)}
            if m in self.floors_ms:
                row["floor"] = self.floors_ms[m]
                row["vs_floor"] = row["median"] / self.floors_ms[m]
            rows[m] = row
        return rows

    def to_dict(self) -> dict:
        return {
            "settings": asdict(self.settings),
            "engine": self.engine,
            "warmup_s": self.warmup_s,
            "peak_memory_mb": self.peak_memory_mb,
            "profile": self.profile,
            "host_rates": self.host_rates,
            "precision": self.precision,
            "gate": self.gate,
            "host": None if self.host is None else self.host.as_dict(),
            "summary": self.summary(),
        }


def engine_threads(described: dict) -> int:
    """The CPU threads an engine computes on (`Engine.describe()`'s "threads"; onnxruntime's "default" is every
    core)."""
    threads = described.get("threads")
    return threads if isinstance(threads, int) and threads > 0 else available_cores()


def roofline_ms(
    config: Pi05Config, profile: DeviceProfile, precision: str, settings: BenchSettings
) -> dict[str, float]:
    """Floors of the four metrics: TTFA = prefill + 1 step (horizon-aware) or + all steps (constant)."""
    floors = model_floors(config, profile, precision, batch=settings.batch)
    prefill, step = floors["prefill"].seconds * 1e3, floors["step"].seconds * 1e3
    first = 1 if settings.schedule == "horizon-aware" else settings.steps
    return {
        "prefill_ms": prefill,
        "step_ms": step,
        "ttfa_ms": prefill + first * step,
        "chunk_ms": prefill + settings.steps * step,
    }


def precision_of(described: dict) -> str:
    """The precision to report for an engine (`Engine.describe()`): its dtype, or for a quantized model the
    weights' precision with the scheme, e.g. "int8 (onnx-int8-dynamic) / fp32 activations"."""
    return precision_label(described.get("quant"), str(described.get("dtype", "fp32")))


def roofline_precision(described: dict) -> str:
    """The precision whose byte size the weights have: a quantization scheme's ("onnx-int8-static" -> int8)
    over the engine's dtype."""
    scheme = str(described.get("quant") or "")
    for name in ("int8", "int4", "fp8", "nvfp4"):
        if name in scheme:
            return name
    return str(described.get("dtype", "fp32"))


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10


def make_engine(
    config: Pi05Config,
    engine: str,
    precision: str,
    device: torch.device,
    profile: DeviceProfile | None = None,
    compile_mode: str | None = None,
    graphs: str | None = None,
    threads: int | None = None,
    artifact: str | Path | None = None,
    workdir: str | Path | None = None,
    allow_failed_gate: bool = False,
) -> Engine:
    """An engine over random weights of `config`; artifact engines export to `workdir` unless given `artifact`.
    A quantized `artifact` whose recorded fidelity gate failed is refused unless `allow_failed_gate`
    (vlash.runtime.loading.check_gate)."""
    if artifact is not None:
        check_gate(artifact, allow_failed_gate)
    if engine == "torch":
        model = build_random(config, dtype=precision, device=device)
        return create_engine("torch", model=model, compile_mode=compile_mode, graphs=graphs)
    if artifact is None:
        from vlash.engines.onnx_export import export_onnx  # extra: onnx

        artifact = Path(workdir or tempfile.mkdtemp(prefix="vlash-bench-")) / f"{config.name}-{precision}"
        export_onnx(build_random(config), artifact, precision=precision)
    return create_engine(engine, artifact=artifact, profile=profile, threads=threads)


def timed_chunk(engine: Engine, sampler: FlowSampler, settings: BenchSettings, seed: int) -> dict[str, list[float]]:
    """One chunk on random inputs of `seed` (prefill, then the sampler's steps, tau shared where the plan allows),
    timed as `vlash bench` reports it: {"prefill_ms", "step_ms", "ttfa_ms", "chunk_ms"} -> this chunk's values."""
    cfg = engine.config
    inputs = random_inputs(cfg, batch=settings.batch, seed=seed, device=engine.device)
    noise = torch.randn(settings.batch, cfg.action_horizon, cfg.action_dim, device=engine.device)
    engine.synchronize()
    t0 = time.perf_counter()
    cache = engine.prefill(inputs)
    engine.synchronize()
    t_prefill = time.perf_counter()
    run = sampler.start(
        lambda x, tau: engine.denoise_step(x, tau, cache),
        noise,
        synchronize=engine.synchronize,
        shared_time=True,
        spans=engine.spans(cache),
    )
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
def run_bench(
    engine: Engine, settings: BenchSettings, progress=None, profile: DeviceProfile | None = None
) -> BenchReport:
    """Time `engine` end to end; `progress(i, total)` is called after every run if given; with `profile` the
    report carries the roofline floor of each metric at the engine's precision."""
    sampler = FlowSampler(SamplerConfig(num_steps=settings.steps, schedule=settings.schedule))
    total = settings.warmup + settings.iters
    if engine.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(engine.device)
    host = HostLoad.now(engine_threads(engine.describe()))  # before any run: the other work's load, not the runs'
    t0 = time.perf_counter()
    for i in range(settings.warmup):
        timed_chunk(engine, sampler, settings, seed=i)
        if progress:
            progress(i + 1, total)
    report = BenchReport(settings, engine.describe(), warmup_s=time.perf_counter() - t0)
    report.precision, report.host = precision_of(report.engine), host
    if profile is not None:
        report.profile = profile.name
        report.floors_ms = roofline_ms(engine.config, profile, roofline_precision(report.engine), settings)
    report.samples = {m: [] for m in METRICS}
    for i in range(settings.iters):
        for metric, values in timed_chunk(engine, sampler, settings, seed=settings.warmup + i).items():
            report.samples[metric].extend(values)
        if progress:
            progress(settings.warmup + i + 1, total)
    report.peak_memory_mb = _peak_memory_mb(engine.device)
    return report
