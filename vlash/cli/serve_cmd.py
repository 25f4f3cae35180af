"""`vlash serve`: serve a policy over ZeroMQ to robot clients (see vlash.server)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from vlash.cli.checkpoint_args import add_checkpoint_options, checkpoint_options
from vlash.cli.cpu_threads import RULE, server_threads
from vlash.cli.policy_args import add_policy_arguments, policy_source
from vlash.cli.preflight import check_tcp_port, check_zmq_bind, positive_int
from vlash.engines import available_engines
from vlash.engines.artifact import ArtifactManifest
from vlash.errors import ConfigError
from vlash.policies.checkpoint import DTYPES
from vlash.policies.policy_dir import CheckpointOptions
from vlash.policies.policy_source import PolicyKind, PolicySource
from vlash.runtime.loading import LoadedRuntime, load_runtime
from vlash.server.config import OpenpiConfig, ServerConfig
from vlash.server.openpi_endpoint import OpenpiEndpoint
from vlash.server.openpi_mapping import PROFILES
from vlash.server.requests import policy_metadata
from vlash.server.server import PolicyServer


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a policy to robot clients over ZeroMQ")
    add_policy_arguments(p, "the policy to serve", ACCEPTED, checkpoint=True, random_weights=True)
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: bf16 on cuda, fp32 on cpu")
    p.add_argument(
        "--engine", choices=available_engines(), default=None, help="default: an artifact's own engine, else torch"
    )
    p.add_argument("--bind", default="tcp://127.0.0.1:5555", help="ZeroMQ endpoint (localhost by default)")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --bind without CurveZMQ keys (anyone who reaches the port can drive the robot)",
    )
    p.add_argument("--schedule", choices=("constant", "horizon-aware"), default="constant", help="default schedule")
    p.add_argument("--steps", type=positive_int, default=None, help="denoise steps (default: the policy's)")
    p.add_argument("--inject-latency", type=float, default=0.0, metavar="MS", help="extra ms per inference")
    p.add_argument("--curve-keys", type=Path, default=None, help="directory with server.key_secret (CurveZMQ)")
    p.add_argument("--allow", type=Path, default=None, help="directory of allowed client public keys (*.key)")
    p.add_argument("--threads", type=positive_int, default=None, help=f"CPU threads for torch (default: {RULE})")
    p.add_argument("--stats-every", type=float, default=30.0, metavar="S", help="print stats every S s (0: never)")
    p.add_argument("--no-warmup", action="store_true", help="skip the warm-up requests")
    p.add_argument(
        "--allow-failed-gate",
        action="store_true",
        help="serve a quantized artifact whose fidelity check (vlash quantize --check) failed",
    )
    add_checkpoint_options(p)
    g = p.add_argument_group("openpi clients", "openpi's websocket protocol, adapted onto this server")
    g.add_argument("--openpi-port", type=int, metavar="PORT", help="websocket port (0: a free one, printed)")
    g.add_argument("--openpi-host", default="127.0.0.1", metavar="HOST", help="interface (localhost by default)")
    g.add_argument("--openpi-profile", choices=list(PROFILES), default="auto", help="observation keys (auto: detect)")
    g.add_argument("--openpi-map", type=Path, metavar="FILE.yaml", help="YAML observation map (configs/openpi/)")


ACCEPTED = {
    PolicyKind.SHIPPED: "",
    PolicyKind.DIRECTORY: "",
    PolicyKind.ARTIFACT: "run by its engine",
    PolicyKind.PRESET: "with --random-weights",
}


@dataclass
class ServePlan:
    """Everything `vlash serve` was told, checked before the policy loads."""

    source: PolicySource
    engine: str  # engine name: --engine, else an artifact's own, else torch
    threads: int  # torch CPU threads
    config: ServerConfig
    openpi: OpenpiConfig | None
    options: CheckpointOptions


def plan(args: argparse.Namespace) -> ServePlan:
    """Check every argument, endpoint and port (one-line errors, nothing heavy loaded)."""
    source = policy_source(args, "serve", ACCEPTED)
    engine = args.engine or "torch"
    if source.kind is PolicyKind.ARTIFACT:
        exported = ArtifactManifest.load(source.path).engine
        engine = args.engine or exported
        if engine == "torch":
            raise ConfigError(f"--policy {source.value!r} is an exported artifact: serve it with --engine {exported}")
    options = checkpoint_options(args)
    if options != CheckpointOptions():
        unused = options.unused_by(source.layout) if source.kind is PolicyKind.DIRECTORY else ["options"]
        if unused:
            raise ConfigError(
                "--tokenizer, --model-config, --asset-id, --no-state-in-prompt and --relative-mask describe LeRobot "
                f"/ openpi directories; --policy {source.value!r} is {source.describe()}, which takes no "
                f"{', '.join(unused)}"
            )
    config = ServerConfig(
        bind=args.bind,
        schedule=args.schedule,
        num_steps=args.steps,
        inject_latency_ms=args.inject_latency,
        curve_keys=args.curve_keys,
        allow_dir=args.allow,
        warm_up_runs=0 if args.no_warmup else 2,  # on the model thread: see ServerConfig.warm_up_runs
        insecure=args.insecure,
    )
    check_zmq_bind(config.bind, "--bind")
    openpi = None
    if args.openpi_port is not None:
        openpi = OpenpiConfig(args.openpi_host, args.openpi_port, args.openpi_profile, args.openpi_map)
        check_tcp_port(openpi.host, openpi.port, "--openpi-port")
    return ServePlan(source, engine, server_threads(args.threads), config, openpi, options)


def load(served: ServePlan, args: argparse.Namespace) -> LoadedRuntime:
    """The runtime `served` names (the weights load here)."""
    source = served.source
    preset = source.kind is PolicyKind.PRESET
    return load_runtime(
        source.value if preset else None,
        None if preset else source.path,
        preset,
        args.device,
        args.dtype,
        served.engine,
        args.steps,
        args.schedule,
        served.options,
        allow_failed_gate=args.allow_failed_gate,
    )


def run(args: argparse.Namespace) -> int:
    served = plan(args)
    torch.set_num_threads(served.threads)
    loaded = load(served, args)
    config, openpi_config = served.config, served.openpi
    runtime = loaded.runtime
    stop = threading.Event()  # SIGINT / SIGTERM, or a serving thread that died (the server then stops itself)
    metadata = policy_metadata(runtime, loaded.model_id, served.engine, loaded.precision)
    server = PolicyServer(runtime, metadata, config, on_failure=lambda exc: stop.set())
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
            f"engine={served.engine} device={runtime.engine.device} threads={torch.get_num_threads()}"
            f"{'' if args.threads else ' (all cores but one)'} "
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
    if server.failure is not None:  # non-zero, so a supervisor (systemd, k8s) restarts the server
        print(f"vlash serve: error: the server stopped: {server.failure!r}", file=sys.stderr, flush=True)
        return 1
    return 0
