"""Engines x precisions on one device: prefill / step / TTFA / chunk (p50 / p99), peak memory, and the
roofline floor beside each median. Prints one markdown table. On a CPU the floor comes from this host's measured
GEMM rate and memory bandwidth (cached, as `vlash bench` does; `--profile-rates` for the profile's figures).

    python tools/bench_engines.py --policies pi05-tiny pi05-small --threads 2 --iters 20
    python tools/bench_engines.py --profile rtx-4090 --variants torch-bf16 torch-bf16-graphs onnxruntime-fp16

A variant is a name -> `Variant(engine, precision, options)` entry in VARIANTS; to add one (e.g. a quantized
artifact) append an entry whose `build(config, profile, workdir, threads)` returns an Engine. The quantized variants
are `vlash quantize --random-weights` of the preset, opened as its engine: `vlash bench --artifact` times the
onnx ones too, but not the torch int8 / int4 policy directories (the torch engine runs a policy, not an artifact).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from vlash.bench import BenchSettings, make_engine, run_bench
from vlash.cli.preflight import non_negative_int, positive_int
from vlash.devices import DeviceProfile, load_profile, model_floors
from vlash.devices.host_rates import HostRates, cached_host_rates, with_host_rates
from vlash.engines.base import Engine, create_engine
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.config import Pi05Config

Builder = Callable[[Pi05Config, DeviceProfile, Path, int | None], Engine]
METRICS = ("prefill_ms", "step_ms", "ttfa_ms", "chunk_ms")


@dataclass(frozen=True)
class Variant:
    engine: str  # engine name (the table's column)
    precision: str  # weights/activations precision
    options: dict = field(default_factory=dict)  # extra make_engine keywords (compile_mode, graphs)
    build: Builder | None = None  # custom builder; default: vlash.bench.make_engine on random weights

    def make(self, config: Pi05Config, profile: DeviceProfile, workdir: Path, threads: int | None) -> Engine:
        if self.build is not None:
            return self.build(config, profile, workdir, threads)
        device = torch.device(profile.device)
        return make_engine(
            config, self.engine, self.precision, device, profile, threads=threads, workdir=workdir, **self.options
        )


def onnxruntime_on(precision: str, providers: tuple[str, ...]) -> Builder:
    """onnxruntime on exactly these GPU execution providers (CPU last for unsupported nodes): EngineUnavailable when
    this onnxruntime lacks one, or when a session fell back to a later provider (the engine checks that)."""

    def build(config: Pi05Config, profile: DeviceProfile, workdir: Path, threads: int | None) -> Engine:
        import onnxruntime as ort

        missing = [p for p in providers if p not in ort.get_available_providers()]
        if missing or not torch.cuda.is_available():
            raise EngineUnavailable(
                f"onnxruntime {ort.__version__} on {', '.join(providers)} needs a CUDA GPU and onnxruntime-gpu "
                f"(`pip install vlash[gpu]`); this one has {ort.get_available_providers()}"
            )
        profile = dataclasses.replace(profile, device="cuda", ort_providers=providers)
        # the engine refuses a session that fell back to another provider (check_session_providers)
        return make_engine(
            config, "onnxruntime", precision, torch.device("cuda"), profile, threads=threads, workdir=workdir
        )

    return build


def tensorrt_engine(precision: str) -> Builder:
    """`vlash export --engine tensorrt` of random weights of `config` (seed 0 on the CPU, as make_engine's), then the
    tensorrt engine; int8 / fp8 calibrate QDQ graphs on simulated frames (vlash.quant, needs the sim extra)."""

    def build(config: Pi05Config, profile: DeviceProfile, workdir: Path, threads: int | None) -> Engine:
        from vlash.engines.export import export_artifact
        from vlash.engines.tensorrt_build import check_precision, import_tensorrt

        trt = import_tensorrt()  # EngineUnavailable before minutes of export
        if not torch.cuda.is_available():
            raise EngineUnavailable("TensorRT engines need a CUDA GPU")
        if precision == "fp8" and torch.cuda.get_device_capability() < (8, 9):
            raise EngineUnavailable(f"fp8 needs compute capability >= 8.9, not {torch.cuda.get_device_capability()}")
        try:
            check_precision(trt, precision)
        except ConfigError as exc:
            raise EngineUnavailable(f"{trt.__name__} {trt.__version__}: {exc}") from exc
        qdq = None
        if precision in ("int8", "fp8"):
            from vlash.quant.onnx_artifact import write_qdq_graphs as qdq
        source = Path(workdir) / f"{config.name}-{config.num_cameras}cam.yaml"  # the config, cameras included
        source.write_text(yaml.safe_dump(config.to_dict()))
        out = Path(workdir) / f"{source.stem}-tensorrt-{precision}"
        export_artifact(out, "tensorrt", precision, preset=str(source), qdq_graphs=qdq)
        return create_engine("tensorrt", artifact=out, profile=profile, threads=threads)

    return build


def quantized(scheme: str) -> Builder:
    """Random weights of the preset, quantized with `scheme` (vlash.quant; static schemes calibrate on a few
    simulated frames), opened as the scheme's engine."""

    def build(config: Pi05Config, profile: DeviceProfile, workdir: Path, threads: int | None) -> Engine:
        from vlash.policies.formats.random_policy import write_random_policy
        from vlash.quant.api import open_quantized, quantize
        from vlash.quant.calibration import FrameSpec

        source = write_random_policy(Path(workdir) / f"{config.name}-fp32", config.name)
        calibration = FrameSpec(episodes=4, frames_per_episode=2)
        out = quantize(source, Path(workdir) / f"{config.name}-{scheme}", scheme, calibration=calibration)
        return open_quantized(out, threads=threads)[0]

    return build


VARIANTS: dict[str, Variant] = {
    "torch-fp32": Variant("torch", "fp32"),
    "torch-fp32-compile": Variant("torch", "fp32", {"compile_mode": "default"}),
    "torch-bf16": Variant("torch", "bf16"),
    "torch-bf16-compile": Variant("torch", "bf16", {"compile_mode": "default"}),
    "torch-bf16-graphs": Variant("torch", "bf16", {"graphs": "chunk"}),
    "torch-bf16-step-graphs": Variant("torch", "bf16", {"graphs": "step"}),
    "onnxruntime-fp32": Variant("onnxruntime", "fp32"),
    "onnxruntime-fp16": Variant("onnxruntime", "fp16"),
    # quantized (vlash.quant): random weights of the preset, quantized, then opened as an engine
    "torch-int8": Variant("torch", "int8", build=quantized("torch-int8")),
    "torch-int4": Variant("torch", "int4", build=quantized("torch-int4")),
    "onnxruntime-int8-dynamic": Variant("onnxruntime", "int8", build=quantized("onnx-int8-dynamic")),
    "onnxruntime-int8-static": Variant("onnxruntime", "int8", build=quantized("onnx-int8-static")),
    # GPU: onnxruntime's CUDA / TensorRT execution providers, and TensorRT engines (tensorrt or tensorrt_rtx)
    "onnxruntime-fp32-cuda": Variant("onnxruntime", "fp32", build=onnxruntime_on("fp32", ("CUDAExecutionProvider",))),
    "onnxruntime-fp16-cuda": Variant("onnxruntime", "fp16", build=onnxruntime_on("fp16", ("CUDAExecutionProvider",))),
    "onnxruntime-fp16-trt": Variant(
        "onnxruntime", "fp16", build=onnxruntime_on("fp16", ("TensorrtExecutionProvider", "CUDAExecutionProvider"))
    ),
    "tensorrt-fp16": Variant("tensorrt", "fp16", build=tensorrt_engine("fp16")),
    "tensorrt-bf16": Variant("tensorrt", "bf16", build=tensorrt_engine("bf16")),
    "tensorrt-fp8": Variant("tensorrt", "fp8", build=tensorrt_engine("fp8")),
}


def _row(policy: str, name: str, variant: Variant, report) -> str:
    summary = report.summary()
    cells = []
    for metric in METRICS:
        row = summary[metric]
        floor = f" ({row['vs_floor']:.0f}x floor)" if "vs_floor" in row else ""
        cells.append(f"{row['median']:.1f} / {row['p99']:.1f}{floor}")
    return f"| {policy} | {name} | {variant.precision} | " + " | ".join(cells) + f" | {report.peak_memory_mb:.0f} |"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policies", nargs="+", default=["pi05-tiny", "pi05-small"])
    p.add_argument("--variants", nargs="+", default=["torch-fp32", "onnxruntime-fp32"], choices=sorted(VARIANTS))
    p.add_argument("--profile", default="cpu", help="device profile (configs/devices/) or jetson")
    p.add_argument("--schedule", choices=("constant", "horizon-aware"), default="constant")
    p.add_argument("--steps", type=positive_int, default=10)
    p.add_argument("--iters", type=positive_int, default=20)
    p.add_argument("--warmup", type=non_negative_int, default=3)
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads for torch and onnxruntime")
    p.add_argument("--profile-rates", action="store_true", help="on a CPU: the profile's rates, not the host's")
    args = p.parse_args(argv)
    try:
        load_profile(args.profile)
    except ConfigError as exc:
        p.error(f"--profile {args.profile}: {exc}")
    if args.threads:
        torch.set_num_threads(args.threads)
    rates = None
    if load_profile(args.profile).device == "cpu" and not args.profile_rates:
        rates, cache = cached_host_rates(torch.get_num_threads())
        print(
            f"<!-- floor from this host: {rates.gemm_gflops:.0f} GFLOP/s fp32 GEMM, {rates.memory_gbs:.1f} GB/s "
            f"copy ({rates.threads} threads, measured {rates.measured_at}; {cache}) -->"
        )
    profile = _profile(args.profile, rates)
    settings = BenchSettings(schedule=args.schedule, steps=args.steps, iters=args.iters, warmup=args.warmup)
    print(
        f"<!-- torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, profile {profile.name}, {args.schedule}, {args.steps} steps -->"
    )
    print(
        "| policy | variant | precision | prefill p50 / p99 | step p50 / p99 | TTFA p50 / p99 | chunk p50 / p99 "
        "| peak MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    spawn = multiprocessing.get_context("spawn")  # one process per cell: peak memory is that cell's own
    with tempfile.TemporaryDirectory(prefix="vlash-bench-engines-") as tmp:
        for policy in args.policies:
            for name in args.variants:
                with spawn.Pool(1) as pool:
                    row = pool.apply(_one_cell, (policy, name, args.profile, rates, settings, args.threads, tmp))
                print(row, flush=True)
    for policy in args.policies:
        for precision in sorted({VARIANTS[name].precision for name in args.variants}):
            floors = model_floors(load_preset(policy), profile, precision)
            text = ", ".join(f"{k} {f.seconds * 1e3:.3f} ms ({f.bound}-bound)" for k, f in floors.items())
            print(f"<!-- roofline {policy} {precision} on {profile.name}: {text} -->")


def _profile(name: str, rates: HostRates | None) -> DeviceProfile:
    return load_profile(name) if rates is None else with_host_rates(load_profile(name), rates)


def _one_cell(
    policy: str,
    name: str,
    profile_name: str,
    rates: HostRates | None,
    settings: BenchSettings,
    threads: int | None,
    tmp: str,
) -> str:
    if threads:
        torch.set_num_threads(threads)
    profile, variant = _profile(profile_name, rates), VARIANTS[name]
    engine = variant.make(load_preset(policy), profile, Path(tmp), threads)
    return _row(policy, name, variant, run_bench(engine, settings, profile=profile))


if __name__ == "__main__":
    main()
