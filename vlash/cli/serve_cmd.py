"""`vlash serve`: serve a policy over ZeroMQ to robot clients (see vlash.server)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

import torch

from vlash.cli.checkpoint_args import add_checkpoint_options, checkpoint_options
from vlash.engines import available_engines
from vlash.policies.checkpoint import DTYPES
from vlash.runtime.loading import load_runtime
from vlash.server.config import OpenpiConfig, ServerConfig
from vlash.server.openpi_endpoint import OpenpiEndpoint
from vlash.server.openpi_mapping import PROFILES
from vlash.server.requests import policy_metadata
from vlash.server.server import PolicyServer


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a policy to robot clients over ZeroMQ")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--policy", help="shipped policy name (checkpoints/<name>), or a preset with --random-weights")
    src.add_argument(
        "--checkpoint", type=Path, help="policy directory: vlash, LeRobot pi0.5 (0.4-0.6) or openpi PyTorch checkpoint"
    )
    p.add_argument("--random-weights", action="store_true", help="--policy names a preset: random weights (benchmarks)")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: bf16 on cuda, fp32 on cpu")
    p.add_argument("--engine", choices=available_engines(), default="torch")
    p.add_argument("--bind", default="tcp://127.0.0.1:5555", help="ZeroMQ endpoint (localhost by default)")
    p.add_argument("--schedule", choices=("constant", "horizon-aware"), default="constant", help="default schedule")
    p.add_argument("--steps", type=int, default=None, help="denoise steps (default: the policy's)")
    p.add_argument("--inject-latency", type=float, default=0.0, metavar="MS", help="extra ms per inference")
    p.add_argument("--curve-keys", type=Path, default=None, help="directory with server.key_secret (CurveZMQ)")
    p.add_argument("--allow", type=Path, default=None, help="directory of allowed client public keys (*.key)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    p.add_argument("--stats-every", type=float, default=30.0, metavar="S", help="print stats every S s (0: never)")
    p.add_argument("--no-warmup", action="store_true", help="skip the warm-up requests")
    add_checkpoint_options(p)
    g = p.add_argument_group("openpi clients", "openpi's websocket protocol, adapted onto this server")
    g.add_argument("--openpi-port", type=int, metavar="PORT", help="websocket port (0: a free one, printed)")
    g.add_argument("--openpi-host", default="127.0.0.1", metavar="HOST", help="interface (localhost by default)")
    g.add_argument("--openpi-profile", choices=list(PROFILES), default="auto", help="observation keys (auto: detect)")
    g.add_argument("--openpi-map", type=Path, metavar="FILE.yaml", help="YAML observation map (configs/openpi/)")


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    config = ServerConfig(
        bind=args.bind,
        schedule=args.schedule,
        num_steps=args.steps,
        inject_latency_ms=args.inject_latency,
        curve_keys=args.curve_keys,
        allow_dir=args.allow,
        warm_up_runs=0 if args.no_warmup else 2,  # on the model thread: see ServerConfig.warm_up_runs
    )
    openpi_config = None  # checked before the policy loads
    if args.openpi_port is not None:
        openpi_config = OpenpiConfig(args.openpi_host, args.openpi_port, args.openpi_profile, args.openpi_map)
    loaded = load_runtime(
        args.policy,
        args.checkpoint,
        args.random_weights,
        args.device,
        args.dtype,
        args.engine,
        args.steps,
        args.schedule,
        checkpoint_options(args),
    )
    runtime = loaded.runtime
    server = PolicyServer(runtime, policy_metadata(runtime, loaded.model_id, args.engine, loaded.precision), config)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    endpoint = server.start()
    openpi = None
    try:
        if openpi_config is not None:  # openpi websocket clients, each through its own client of this server
            openpi = OpenpiEndpoint(server, openpi_config)
            print(f"vlash serve: openpi clients on {openpi.start()} (observations: {openpi.map_name})", flush=True)
        print(  # the last startup line: everything is listening once it is out
            f"vlash serve: {loaded.model_id} ({loaded.params / 1e6:.1f}M params, {loaded.precision}) "
            f"engine={args.engine} device={runtime.engine.device} threads={torch.get_num_threads()} "
            f"steps={runtime.num_steps} schedule={runtime.schedule} load {loaded.load_s:.1f} s "
            f"warm-up {server.warm_up_s:.1f} s serving on {endpoint}",
            flush=True,
        )
        last = ""
        while not stop.wait(args.stats_every if args.stats_every > 0 else None):
            line = server.stats.line(len(server.jobs))
            if line != last:  # quiet while idle
                print(f"vlash serve: {line}", flush=True)
                last = line
    finally:
        if openpi is not None:
            openpi.stop()  # before the server: it closes this endpoint's clients
        server.stop()
        print(f"vlash serve: stopped; {server.stats.line()}", flush=True)
        sys.stdout.flush()
    return 0
