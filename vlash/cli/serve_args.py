"""`vlash serve`'s command line and every check that needs no model code: the policy and the files named, the
endpoints and ports, run before torch is imported, so a wrong path is reported at once (vlash.cli.serve_cmd runs
them, then vlash.cli.serve_run loads the policy and serves it).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from vlash.cli.checkpoint_args import add_checkpoint_options, check_checkpoint_files
from vlash.cli.cpu_threads import RULE
from vlash.cli.engine_args import add_torch_engine_arguments
from vlash.cli.policy_args import add_policy_arguments, policy_source
from vlash.cli.preflight import check_tcp_port, check_zmq_bind, positive_int
from vlash.engines import available_engines
from vlash.errors import ConfigError
from vlash.policies.names.source import PolicyKind, PolicySource
from vlash.policies.pi05.dtypes import DTYPE_NAMES
from vlash.server.config import OpenpiConfig, ServerConfig, check_unauthenticated, is_loopback_host
from vlash.server.openpi_mapping import PROFILES


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve a policy to robot clients over ZeroMQ")
    add_policy_arguments(p, "the policy to serve", ACCEPTED, checkpoint=True, random_weights=True)
    p.add_argument(
        "--device",
        default="auto",
        help="cpu, cuda, cuda:N or auto (cuda when torch sees a GPU; with --ray: when the replicas can have one)",
    )
    p.add_argument("--dtype", choices=sorted(DTYPE_NAMES), default=None, help="default: bf16 on cuda, fp32 on cpu")
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


@dataclass
class CheckedArgs:
    """What `check_args` found, before anything heavy loads."""

    source: PolicySource  # the policy to serve
    config: ServerConfig | None  # the ZeroMQ server's settings (None with --ray)
    openpi: OpenpiConfig | None  # the openpi endpoint's (None: not asked for, or --ray)
    random_dims: dict = field(default_factory=dict)  # --random-weights: action_dims and state_dims given


def check_args(args: argparse.Namespace) -> CheckedArgs:
    """The policy, the files, endpoints and ports named, and the flags that go together: one-line errors, with no
    torch imported yet."""
    source = policy_source(args, "serve", ACCEPTED)
    directory = source.kind is PolicyKind.DIRECTORY
    check_checkpoint_files(args, source.path if directory else None, source.layout if directory else None)
    random_dims = {k: v for k, v in {"action_dims": args.action_dims, "state_dims": args.state_dims}.items() if v}
    if random_dims and (args.ray or source.kind is not PolicyKind.PRESET):
        raise ConfigError("--action-dims and --state-dims shape one server's --random-weights policy: not a "
                          "checkpoint, which has its own, nor a --ray fleet")  # fmt: skip
    if args.ray:
        _check_fleet_flags(args)
        return CheckedArgs(source, None, None)
    fleet_only = given_flags(args, FLEET_FLAGS)
    if fleet_only:
        raise ConfigError(f"{', '.join(fleet_only)} configure a Ray Serve fleet: add --ray")
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
    return CheckedArgs(source, config, openpi, random_dims)


def _check_fleet_flags(args: argparse.Namespace) -> None:
    """--ray: no ZeroMQ server flags; the ingress needs a fixed port, free unless the cluster is elsewhere."""
    zmq_only = given_flags(args, ZMQ_FLAGS)
    if zmq_only:
        raise ConfigError(f"{', '.join(zmq_only)} configure the ZeroMQ server, which --ray does not start")
    host, port = args.openpi_host, 8000 if args.openpi_port is None else args.openpi_port
    if port == 0:
        raise ConfigError("--openpi-port 0: Ray Serve's HTTP proxy needs a fixed port with --ray")
    # the ingress has no authentication (a fleet has no CurveZMQ keys): the openpi endpoint's rule, for a reachable host
    fix = "listen on 127.0.0.1 (--openpi-host)"
    check_unauthenticated(f"openpi ingress {host}:{port}", not is_loopback_host(host), False, args.insecure, fix)
    if args.ray_address is None:
        check_tcp_port(args.openpi_host, port, "--openpi-port")
