"""`vlash bench --policy NAME | --artifact DIR`: prefill / step / TTFA / chunk latency (median, p99) of random
weights (or of an exported artifact), per engine and precision, with the roofline floor of a device profile
beside each measurement.

`--device` takes a torch device (cpu, cuda, cuda:N, auto) or a device profile (configs/devices/: cpu, rtx-4090,
h100, jetson-orin, jetson-thor, ..., or `jetson` to detect Orin / Thor); a profile sets the default engine,
precision, threads and CUDA graphs, and the floor. `--compile` / `--cuda-graphs` without `--engine` mean the torch
engine (they apply to no other). On a CPU the floor comes from this host's fastest GEMM kernel per precision
(torch, oneDNN, onnxruntime; the one that set it is printed) and its copy bandwidth (measured once, cached), not
from the profile's figures (`--profile-rates`: those)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from vlash.bench_settings import BenchSettings
from vlash.cli.command import Command
from vlash.cli.cpu_threads import RULE, server_threads
from vlash.cli.engine_args import torch_engine_flags, torch_engine_options
from vlash.cli.flags import ConfigFlags
from vlash.cli.policy_args import policy_flags
from vlash.cli.preflight import positive_int
from vlash.devices import DeviceProfile, available_profiles, is_profile_name, load_profile
from vlash.engines import available_engines
from vlash.engines.artifact import ArtifactManifest
from vlash.errors import ConfigError
from vlash.policies.names.source import PolicyKind, PolicySource, resolve_policy
from vlash.policies.pi05 import available_presets
from vlash.policies.pi05.dtypes import DTYPE_NAMES
from vlash.progress import progress

if TYPE_CHECKING:
    import torch

    from vlash.bench import BenchReport

ACCEPTED = {PolicyKind.PRESET: "random weights", PolicyKind.ARTIFACT: "the same as --artifact"}


@dataclass(frozen=True)
class BenchOptions:
    """Where and how the policy runs."""

    # time an exported artifact (its policy, engine and precision are the defaults); default: random weights
    artifact: Path | None = None
    device: str = "auto"  # cpu, cuda, cuda:N, auto, or a device profile (configs/devices/; jetson: the Jetson this is)
    # default: the profile's, else torch
    engine: str | None = field(default=None, metadata={"choices": tuple(available_engines())})
    # default: the profile's, else bf16 on cuda, fp32 on cpu
    dtype: str | None = field(
        default=None, metadata={"choices": tuple(sorted(DTYPE_NAMES)), "flag": "--precision", "aliases": ("--dtype",)}
    )
    # number of cameras (default: the policy's)
    cameras: int | None = field(default=None, metadata={"parse": positive_int})
    threads: int | None = field(default=None, metadata={"parse": positive_int})  # CPU threads for torch and onnxruntime
    # CPU floor from the device profile's figures (default: this host's measured GEMM rate and bandwidth)
    profile_rates: bool = False
    remeasure: bool = False  # measure this host's rates again (replaces the cache)
    json: bool = False  # print the report as JSON
    allow_failed_gate: bool = False  # time a quantized artifact whose fidelity check (vlash quantize --check) failed


# What is timed: flags of BenchSettings (vlash.cli.flags)
BENCH_FLAGS = ConfigFlags(
    BenchSettings,
    "schedule steps iters warmup batch",
    title="what is timed",
    notes={"steps": "(default: the policy's, 10 for pi05)"},
)
OPTIONS = ConfigFlags(
    BenchOptions,
    "artifact device engine dtype cameras threads json",
    title="where it runs",
    notes={
        "device": f"({', '.join(available_profiles())})",
        "threads": f"(default: the device profile's, else {RULE}: timings that hold up beside other work)",
    },
    advanced="profile_rates remeasure allow_failed_gate",
)
COMMAND = Command(
    "bench",
    "time prefill, denoise step, time to first action and full chunk",
    __doc__.split("\n\n", 1)[1].replace("\n", " "),
    (policy_flags(f"what to time ({', '.join(available_presets())})", ACCEPTED, required=False, title="what is timed"),
     BENCH_FLAGS, OPTIONS, torch_engine_flags()),
)  # fmt: skip


def _source(args: argparse.Namespace) -> tuple[PolicySource | None, Path | None]:
    """(the preset to time, None) or (None, the artifact to time): --artifact, or --policy naming either."""
    if args.policy is None:
        return None, args.artifact
    source = resolve_policy(args.policy)
    hint = ""
    if source.kind in (PolicyKind.SHIPPED, PolicyKind.DIRECTORY):
        shapes = f"--policy {source.config().name}" if source.layout == "vlash" else "its preset"
        hint = f"for its shapes give {shapes}; to time its weights, `vlash export` it and give the artifact"
    source.require("bench", ACCEPTED, hint)
    if args.artifact is not None:
        raise ConfigError("--artifact fixes the policy and its cameras; drop --policy / --cameras")
    return (None, source.path) if source.kind is PolicyKind.ARTIFACT else (source, None)


def _config(args: argparse.Namespace, source: PolicySource | None, manifest: ArtifactManifest | None):
    """The policy config: the artifact's (its graphs fix the shapes) or the named preset's."""
    if manifest is not None:
        if args.cameras is not None:
            raise ConfigError("--artifact fixes the policy and its cameras; drop --policy / --cameras")
        if args.batch != manifest.batch:
            raise ConfigError(
                f"the artifact's graphs take batch {manifest.batch} (static shapes), not --batch {args.batch}"
            )
        return manifest.model_config
    if source is None:
        raise ConfigError("give --policy NAME (random weights) or --artifact DIR (an exported artifact)")
    config = source.config()
    return config if args.cameras is None else config.with_cameras(args.cameras)


def _profile(name: str, device: torch.device) -> DeviceProfile | None:
    if is_profile_name(name):
        return load_profile(name)
    return load_profile("cpu") if device.type == "cpu" else None  # no floor for an unnamed GPU


def print_report(report: BenchReport, console: Console) -> None:
    s, e = report.settings, report.engine
    console.print(
        f"[bold]{e['policy']}[/] engine={e['engine']} device={e['device']} precision={report.precision} "
        f"compile={e['compile']} threads={e['threads']} schedule={s.schedule} steps={s.steps} "
        f"batch={s.batch} runs={s.iters} (warm-up {report.warmup_s:.1f} s) "
        f"peak memory {report.peak_memory_mb:.0f} MiB profile={report.profile or '-'}"
    )
    if report.gate:
        console.print(f"quantization: {report.gate}")
    table = Table("metric", "median ms", "p99 ms", "floor ms", "measured / floor", "samples")
    for metric, row in report.summary().items():
        floor = f"{row['floor']:.3f}" if "floor" in row else "-"
        ratio = f"{row['vs_floor']:.1f}x" if "vs_floor" in row else "-"
        table.add_row(metric, f"{row['median']:.2f}", f"{row['p99']:.2f}", floor, ratio, str(row["n"]))
    console.print(table)
    for line in report.host.lines() if report.host is not None else ():  # the load beside the timings
        console.print(line, soft_wrap=True)


def _host_floor(profile: DeviceProfile, threads: int, remeasure: bool, console: Console):
    """(`profile` with this host's fastest GEMM per precision and copy bandwidth, the rates): the CPU floor."""
    from vlash.devices.host_rates import cached_host_rates, with_host_rates  # extra: server

    with console.status("measuring this host's GEMM kernels and memory bandwidth (once; cached)"):
        rates, cache = cached_host_rates(threads, remeasure=remeasure)
    console.print(
        f"floor from this host: {rates.describe()}, {rates.memory_gbs:.1f} GB/s copy "
        f"({rates.threads} threads, measured {rates.measured_at}; {cache})",
        soft_wrap=True,
    )
    return with_host_rates(profile, rates), rates


def run(args: argparse.Namespace) -> int:
    source, artifact = _source(args)  # before torch is imported: a wrong path is reported at once
    if artifact is not None and not artifact.is_dir():
        raise ConfigError(f"--artifact {str(artifact)!r}: no such directory")
    manifest = ArtifactManifest.load(artifact) if artifact is not None else None
    config = _config(args, source, manifest)
    settings = BENCH_FLAGS.build(args, steps=BENCH_FLAGS.given(args).get("steps", config.num_steps))
    import torch  # extra: server

    from vlash.bench import make_engine, run_bench  # extra: server
    from vlash.devices import resolve_device  # extra: server

    device = resolve_device(args.device)
    profile = _profile(args.device, device)
    named = profile if is_profile_name(args.device) else None  # only a named profile sets defaults
    threads = args.threads or (named.threads if named else None) or server_threads()  # not every core (cpu_threads)
    if threads:
        torch.set_num_threads(threads)
    torch_only = "torch" if (args.compile or args.cuda_graphs) else None  # the flags name the engine they apply to
    engine_name = args.engine or (manifest.engine if manifest else None) or torch_only
    engine_name = engine_name or (named.engine if named else "torch")
    dtype = args.dtype or (manifest.precision if manifest else None)
    dtype = dtype or (named.precision if named else ("bf16" if device.type == "cuda" else "fp32"))
    if manifest is not None and engine_name == "torch":
        raise ConfigError(f"the torch engine runs a policy, not an artifact; use --engine {manifest.engine}")
    torch_options = torch_engine_options(args, engine_name, device, named)
    console = Console(stderr=args.json)
    rates = None
    if device.type == "cpu" and profile is not None and not args.profile_rates:
        profile, rates = _host_floor(profile, threads or torch.get_num_threads(), args.remeasure, console)
    label = manifest.precision_label if manifest is not None else dtype
    with console.status(f"building {config.name} ({engine_name}, {label}) on {device}"):
        engine = make_engine(
            config,
            engine_name,
            dtype,
            device,
            profile=named,
            **torch_options,
            threads=threads,
            artifact=artifact,
            allow_failed_gate=args.allow_failed_gate,
        )
    with progress("vlash bench: runs", settings.warmup + settings.iters, transient=True) as update:
        report = run_bench(engine, settings, progress=lambda i, n: update(i), profile=profile)
    report.host_rates = asdict(rates) if rates is not None else {}
    gate = manifest.quant_gate if manifest is not None else None
    report.gate = gate.describe() if gate is not None else ""
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report, console)
    return 0
