"""`vlash bench --policy NAME`: prefill / step / TTFA / chunk latency (median, p99) of random weights."""

from __future__ import annotations

import argparse
import json

import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from engines import create_engine
from vlash.bench import BenchReport, BenchSettings, run_bench
from vlash.errors import ConfigError
from vlash.policies.checkpoint import DTYPES, build_random
from vlash.policies.pi05 import available_presets, load_preset


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="time prefill, denoise step, time to first action and full chunk")
    p.add_argument("--policy", required=True, help=f"preset name or YAML path ({', '.join(available_presets())})")
    p.add_argument("--schedule", choices=("constant", "horizon-aware"), default="constant")
    p.add_argument("--steps", type=int, default=None, help="Euler steps (default: the policy's, 10 for pi05)")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when available)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: bf16 on cuda, fp32 on cpu")
    p.add_argument("--cameras", type=int, default=None, help="number of cameras (default: the policy's)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--iters", type=int, default=20, help="timed runs")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's)")
    p.add_argument(
        "--compile",
        default=None,
        choices=("default", "reduce-overhead", "max-autotune"),
        help="torch.compile the denoise step (reduce-overhead = CUDA graphs)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {name}: no CUDA device visible to torch")
    return device


def _config(args: argparse.Namespace):
    config = load_preset(args.policy)
    return config if args.cameras is None else config.with_cameras(args.cameras)


def print_report(report: BenchReport, console: Console) -> None:
    s, e = report.settings, report.engine
    console.print(
        f"[bold]{e['policy']}[/] engine={e['engine']} device={e['device']} dtype={e['dtype']} "
        f"compile={e['compile']} threads={e['threads']} schedule={s.schedule} steps={s.steps} "
        f"batch={s.batch} runs={s.iters} (warm-up {report.warmup_s:.1f} s)"
    )
    table = Table("metric", "median ms", "p99 ms", "samples")
    for metric, row in report.summary().items():
        table.add_row(metric, f"{row['median']:.2f}", f"{row['p99']:.2f}", str(row["n"]))
    console.print(table)


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = _device(args.device)
    config = _config(args)
    dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    settings = BenchSettings(
        schedule=args.schedule,
        steps=args.steps or config.num_steps,
        iters=args.iters,
        warmup=args.warmup,
        batch=args.batch,
    )
    console = Console(stderr=args.json)
    with console.status(f"building {config.name} ({dtype}) on {device}"):
        engine = create_engine(
            "torch", model=build_random(config, dtype=dtype, device=device), compile_mode=args.compile
        )
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("benchmark", total=settings.warmup + settings.iters)
        report = run_bench(engine, settings, progress=lambda i, n: bar.update(task, completed=i))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report, console)
    return 0
