"""`vlash serve`: serve a policy over ZeroMQ to robot clients (see vlash.server)."""

from __future__ import annotations

import argparse
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from robot_io.stop_signals import handle_stop_signals
from vlash.cli.checkpoint_args import add_checkpoint_options, checkpoint_options
from vlash.cli.cpu_threads import RULE, server_threads
from vlash.cli.engine_args import add_torch_engine_arguments, torch_engine_options
from vlash.cli.policy_args import add_policy_arguments, policy_source
from vlash.cli.preflight import check_tcp_port, check_zmq_bind, positive_int
from vlash.devices import is_profile_name, load_profile, resolve_device
from vlash.engines import available_engines
from vlash.engines.artifact import ArtifactManifest
from vlash.errors import ConfigError
from vlash.policies.checkpoint import DTYPES
from vlash.policies.policy_dir import CheckpointOptions
from vlash.policies.policy_source import PolicyKind, PolicySource, looks_like_path
from vlash.runtime.loading import LoadedRuntime, load_runtime
from vlash.server.config import OpenpiConfig, ServerConfig, check_unauthenticated, is_loopback_host
from vlash.server.openpi_endpoint import OpenpiEndpoint
from vlash.server.openpi_mapping import PROFILES
from vlash.server.requests import policy_metadata
from vlash.server.server import PolicyServer


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve a policy to robot clients over ZeroMQ")
    add_policy_arguments(p, "the policy to serve", ACCEPTED, checkpoint=True, random_weights=True)
    p.add_argument(
        "--device",
        default="auto",
        help="cpu, cuda, cuda:N or auto (cuda when torch sees a GPU; with --ray: when the replicas can have one)",
    )
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: bf16 on cuda, fp32 on cpu")
    p.add_argument(
        "--engine", choices=available_engines(), default=None, help="default: an artifact's own engine, else torch"
    )
    add_torch_engine_arguments(p)
    p.add_argument("--action-dims", type=positive_int, default=None, help="--random-weights: the robot's action "
                   "entries (default 2), to try a robot's wiring before its policy exists")  # fmt: skip
    p.add_argument("--state-dims", type=positive_int, default=None, help="--random-weights: the robot's state "
                   "entries (default: --action-dims)")  # fmt: skip
    p.add_argument("--bind", default="tcp://127.0.0.1:5555", help="ZeroMQ endpoint (localhost by default)")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="serve unauthenticated clients where that needs saying: a non-loopback --bind without CurveZMQ keys, an "
        "openpi endpoint on a non-loopback --openpi-host or beside --curve-keys (anyone who reaches it can drive the "
        "robot)",
    )
    p.add_argument("--schedule", choices=("constant", "horizon-aware"), default="constant", help="default schedule")
    p.add_argument("--steps", type=positive_int, default=None, help="denoise steps (default: the policy's)")
    p.add_argument("--inject-latency", type=float, default=0.0, metavar="MS", help="extra ms per inference")
    p.add_argument("--max-batch", type=positive_int, default=ServerConfig.max_batch, help="requests run together")
    p.add_argument(
        "--batch-wait-ms", type=float, default=ServerConfig.batch_wait_ms, metavar="MS", help="longest wait to batch"
    )
    p.add_argument("--max-pending", type=positive_int, default=ServerConfig.max_pending, help="waiting; then BUSY")
    p.add_argument("--curve-keys", type=Path, default=None, help="directory with server.key_secret (CurveZMQ)")
    p.add_argument("--allow", type=Path, default=None, help="directory of allowed client public keys (*.key)")
    threads_help = f"CPU threads for torch and onnxruntime (default: {RULE})"
    p.add_argument("--threads", type=positive_int, default=None, help=threads_help)
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
    r = p.add_argument_group(
        "a fleet on Ray Serve (pip install 'vlash[fleet]')",
        "model replicas behind an openpi websocket ingress on --openpi-host/--openpi-port (8000 unless given), "
        "batching as --max-batch and --batch-wait-ms say; no ZeroMQ endpoint",
    )
    r.add_argument("--ray", action="store_true", help="serve the policy as a Ray Serve fleet")
    r.add_argument("--replicas", type=positive_int, default=1, help="model replicas")
    r.add_argument(
        "--replica-gpus",
        type=float,
        default=None,
        metavar="N",
        help="GPUs per replica (default: 1 with --device cuda, and with auto when the replicas can have one; else 0)",
    )
    r.add_argument("--ray-address", default=None, metavar="ADDR", help="a running Ray cluster (default: start one)")
    return p


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
    threads: int  # CPU threads of torch and onnxruntime
    config: ServerConfig
    openpi: OpenpiConfig | None
    options: CheckpointOptions
    engine_options: dict  # the torch engine's compile_mode and graphs
    random_dims: dict  # --random-weights: its action_dims and state_dims (empty: the preset's defaults)


def policy_plan(args: argparse.Namespace) -> tuple[PolicySource, str, CheckpointOptions, dict]:
    """The policy, its engine, checkpoint options and torch engine options, checked (one-line errors, nothing heavy
    loaded)."""
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
    profile = load_profile(args.device) if is_profile_name(args.device) else None
    if profile is not None:
        device = torch.device(profile.device)
    elif args.ray:  # the replicas' device, decided on them (this node may have no GPU); FleetConfig checks it
        device = torch.device("cpu" if args.device == "cpu" else "cuda")
    else:
        device = resolve_device(args.device)
    return source, engine, options, torch_engine_options(args, engine, device, profile)


def plan(args: argparse.Namespace) -> ServePlan:
    """Check every argument, endpoint and port (one-line errors, nothing heavy loaded)."""
    source, engine, options, engine_options = policy_plan(args)
    fleet_only = given_flags(args, FLEET_FLAGS)
    if fleet_only:
        raise ConfigError(f"{', '.join(fleet_only)} configure a Ray Serve fleet: add --ray")
    random_dims = {k: v for k, v in {"action_dims": args.action_dims, "state_dims": args.state_dims}.items() if v}
    if random_dims and source.kind is not PolicyKind.PRESET:
        raise ConfigError("--action-dims and --state-dims shape a --random-weights policy; a checkpoint has its own")
    config = ServerConfig(
        bind=args.bind,
        schedule=args.schedule,
        num_steps=args.steps,
        inject_latency_ms=args.inject_latency,
        max_batch=args.max_batch,
        batch_wait_ms=args.batch_wait_ms,
        max_pending=args.max_pending,
        curve_keys=args.curve_keys,
        allow_dir=args.allow,
        warm_up_runs=0 if args.no_warmup else 2,  # on the model thread: see ServerConfig.warm_up_runs
        insecure=args.insecure,
    )
    check_zmq_bind(config.bind, "--bind")
    openpi = None
    if args.openpi_port is not None:
        openpi = OpenpiConfig(args.openpi_host, args.openpi_port, args.openpi_profile, args.openpi_map)
        openpi.check_access(config)  # no authentication: a reachable host, or CurveZMQ keys, needs --insecure
        check_tcp_port(openpi.host, openpi.port, "--openpi-port")
    threads = server_threads(args.threads)
    return ServePlan(source, engine, threads, config, openpi, options, engine_options, random_dims)


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
        threads=served.threads,
        random_dims=served.random_dims,
        **served.engine_options,
    )


def run(args: argparse.Namespace) -> int:
    if args.ray:
        return run_fleet(args)
    served = plan(args)
    torch.set_num_threads(served.threads)
    loaded = load(served, args)
    config, openpi_config = served.config, served.openpi
    runtime = loaded.runtime
    stop = threading.Event()  # SIGINT / SIGTERM, or a serving thread that died (the server then stops itself)
    metadata = policy_metadata(runtime, loaded.model_id, served.engine, loaded.precision)
    server = PolicyServer(runtime, metadata, config, on_failure=lambda exc: stop.set())
    with handle_stop_signals(lambda signum: stop.set()):  # the handlers before it come back when serving ends
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


# the ZeroMQ server's flags, which a fleet refuses rather than ignores, and the fleet's own
ZMQ_FLAGS = (
    "--bind",
    "--curve-keys",
    "--allow",
    "--inject-latency",
    "--threads",
    "--stats-every",
    "--max-pending",
)
FLEET_FLAGS = ("--replicas", "--replica-gpus", "--ray-address")


def given_flags(args: argparse.Namespace, flags: tuple[str, ...]) -> list[str]:
    """Those of `flags` (long options of `vlash serve`) whose value in `args` is not the parser's default."""
    defaults = add_parser(argparse.ArgumentParser().add_subparsers())
    dests = {flag: flag.removeprefix("--").replace("-", "_") for flag in flags}
    return [flag for flag, dest in dests.items() if getattr(args, dest) != defaults.get_default(dest)]


def run_fleet(args: argparse.Namespace) -> int:
    """`vlash serve --ray`: the policy on Ray Serve (vlash.fleet) until SIGINT / SIGTERM."""
    zmq_only = given_flags(args, ZMQ_FLAGS)
    if zmq_only:
        raise ConfigError(f"{', '.join(zmq_only)} configure the ZeroMQ server, which --ray does not start")
    try:
        from vlash.fleet.app import serve_fleet
        from vlash.fleet.config import FleetConfig
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("ray", "fastapi", "starlette"):
            raise
        raise ConfigError(
            f"vlash serve --ray needs Ray Serve ({exc.name} is missing): pip install 'vlash[fleet]'"
        ) from None
    source, engine, options, engine_options = policy_plan(args)
    if args.action_dims or args.state_dims:
        raise ConfigError("--action-dims / --state-dims shape a single server's random weights, not a --ray fleet")
    named = source.kind in (PolicyKind.PRESET, PolicyKind.SHIPPED)  # a name: found on every node
    policy = str(Path(source.value).resolve()) if named and looks_like_path(source.value) else source.value
    # --device auto: no GPU here, decided once Ray is up (serve_fleet's auto_gpus: where the replicas can have one)
    auto_gpus = args.device == "auto" and args.replica_gpus is None
    gpus = args.replica_gpus if args.replica_gpus is not None else float(args.device.startswith("cuda"))
    config = FleetConfig(
        policy=policy if named else None,
        checkpoint=None if named else str(Path(source.path).resolve()),
        random_weights=source.kind is PolicyKind.PRESET,
        device=args.device,
        dtype=args.dtype,
        engine=engine,
        **engine_options,
        num_steps=args.steps,
        schedule=args.schedule,
        checkpoint_options=options,
        allow_failed_gate=args.allow_failed_gate,
        warm_up_runs=0 if args.no_warmup else 2,
        num_replicas=args.replicas,
        num_gpus=gpus,
        max_batch=args.max_batch,
        batch_wait_ms=args.batch_wait_ms,
        openpi_profile=args.openpi_profile,
        openpi_map=None if args.openpi_map is None else str(args.openpi_map),
    )
    host, port = args.openpi_host, 8000 if args.openpi_port is None else args.openpi_port
    if port == 0:
        raise ConfigError("--openpi-port 0: Ray Serve's HTTP proxy needs a fixed port with --ray")
    # the ingress has no authentication (a fleet has no CurveZMQ keys): the openpi endpoint's rule, for a reachable host
    fix = "listen on 127.0.0.1 (--openpi-host)"
    check_unauthenticated(f"openpi ingress {host}:{port}", not is_loopback_host(host), False, args.insecure, fix)
    if args.ray_address is None:
        check_tcp_port(host, port, "--openpi-port")

    def ready(url: str, served: FleetConfig) -> None:
        print(
            f"vlash serve --ray: openpi clients on {url} ({served.num_replicas} model replicas, "
            f"{served.num_gpus:g} GPU each, device={served.device}, batches of up to {served.max_batch}); "
            "Ctrl-C stops",
            flush=True,
        )

    if not serve_fleet(config, host, port, args.ray_address, ready, auto_gpus):  # until SIGINT / SIGTERM
        print("vlash serve --ray: interrupted before every replica was running", file=sys.stderr, flush=True)
        return 130
    print("vlash serve --ray: stopped", flush=True)
    return 0
