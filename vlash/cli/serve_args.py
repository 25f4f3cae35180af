"""`vlash serve`'s command line and every check that needs no model code: the policy and the files named, the
endpoints and ports, run before torch is imported, so a wrong path is reported at once (vlash.cli.serve_cmd runs
them, then vlash.cli.serve_run loads the policy and serves it).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from vlash.cli.checkpoint_args import add_checkpoint_options, check_checkpoint_files, check_tokenizer_first
from vlash.cli.config_flags import ConfigFlags, StoreGiven, add_renamed_flags, given_dests
from vlash.cli.cpu_threads import RULE
from vlash.cli.engine_args import add_torch_engine_arguments
from vlash.cli.policy_args import add_policy_arguments, policy_source, policy_value
from vlash.cli.preflight import check_tcp_port, check_zmq_bind, positive_int
from vlash.devices.cuda_check import check_cuda, wants_cuda
from vlash.engines import available_engines
from vlash.errors import ConfigError
from vlash.fleet.config import FleetConfig
from vlash.policies.names.source import PolicyKind, PolicySource, hub_download_of
from vlash.policies.pi05.dtypes import DTYPE_NAMES
from vlash.server.config import OpenpiConfig, ServerConfig, check_unauthenticated, is_loopback_host

# The server's, the openpi endpoint's and the fleet's settings: flags generated from their configs (config_flags)
SERVER_FLAGS = ConfigFlags(
    ServerConfig,
    "bind insecure schedule steps inject_latency_ms max_batch batch_wait_ms max_pending curve_keys allow_dir",
)
OPENPI_FLAGS = ConfigFlags(
    OpenpiConfig,
    "port host profile map_file max_connections refusal_delay_s",
    prefix="openpi_",
    notes={"port": "(given: openpi clients are served; with --ray always, on the ingress's port, default: {default})"},
)
FLEET_FLAGS = ConfigFlags(
    FleetConfig,
    "num_replicas num_gpus",
    notes={"num_gpus": "(default: 1 with --device cuda, and with auto when the replicas can have one; else 0)"},
)
RENAMED = {
    "--inject-latency": "--inject-latency-ms",
    "--allow": "--allow-dir",
    "--openpi-map": "--openpi-map-file",
    "--replicas": "--num-replicas",
    "--replica-gpus": "--num-gpus",
}
# full requests a served policy runs before serving, as a fleet's replica does (ServerConfig's own default, 0, suits
# a server embedded in a test or a tool)
WARM_UP_RUNS = FleetConfig.warm_up_runs


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
    SERVER_FLAGS.add_to(p)
    threads_help = f"CPU threads for torch and onnxruntime (default: {RULE})"
    p.add_argument("--threads", action=StoreGiven, type=positive_int, default=None, help=threads_help)
    p.add_argument("--stats-every", action=StoreGiven, type=float, default=30.0, metavar="S",
                   help="print stats every S s (0: never)")  # fmt: skip
    p.add_argument("--no-warmup", action="store_true", help=f"skip the {WARM_UP_RUNS} warm-up requests")
    p.add_argument(
        "--allow-failed-gate",
        action="store_true",
        help="serve a quantized artifact whose fidelity check (vlash quantize --check) failed",
    )
    add_checkpoint_options(p)
    OPENPI_FLAGS.add_to(p.add_argument_group("openpi clients", "openpi's websocket protocol, adapted onto this server"))
    r = p.add_argument_group(
        "a fleet on Ray Serve (pip install 'vlash[fleet]')",
        "model replicas behind an openpi websocket ingress on --openpi-host/--openpi-port, batching as --max-batch "
        "and --batch-wait-ms say; no ZeroMQ endpoint",
    )
    r.add_argument("--ray", action="store_true", help="serve the policy as a Ray Serve fleet")
    FLEET_FLAGS.add_to(r)
    r.add_argument("--ray-address", action=StoreGiven, default=None, metavar="ADDR",
                   help="a running Ray cluster (default: start one)")  # fmt: skip
    add_renamed_flags(p, RENAMED)
    return p


ACCEPTED = {
    PolicyKind.SHIPPED: "",
    PolicyKind.DIRECTORY: "",
    PolicyKind.ARTIFACT: "run by its engine",
    PolicyKind.PRESET: "with --random-weights",
}


# the ZeroMQ server's flags (dests), which a fleet refuses rather than ignores, and the fleet's own
ZMQ_ONLY = ("bind", "curve_keys", "allow_dir", "inject_latency_ms", "threads", "stats_every", "max_pending")
ZMQ_ONLY += (
    "openpi_max_connections",
    "openpi_refusal_delay_s",
)  # `vlash serve`'s endpoint (a thread per connection), not the ingress
FLEET_ONLY = ("num_replicas", "num_gpus", "ray_address")
# the settings a fleet takes from the server's and the openpi endpoint's flags (FleetConfig fields)
FLEET_SHARED = ("steps", "schedule", "max_batch", "batch_wait_ms")


def given_flags(args: argparse.Namespace, dests: tuple[str, ...]) -> list[str]:
    """The flags (of `vlash serve`, by dest) given on the command line, in the order of `dests`."""
    given = given_dests(args)
    return [f"--{dest.replace('_', '-')}" for dest in dests if dest in given]


@dataclass
class CheckedArgs:
    """What `check_args` found, before anything heavy loads."""

    source: PolicySource  # the policy to serve
    config: ServerConfig | None  # the ZeroMQ server's settings (None with --ray)
    openpi: OpenpiConfig | None  # the openpi endpoint's (None: not asked for, or --ray)
    random_dims: dict = field(default_factory=dict)  # --random-weights: action_dims and state_dims given


def check_args(args: argparse.Namespace) -> CheckedArgs:
    """The policy, the files, endpoints and ports named, and the flags that go together: one-line errors, with no
    torch imported yet (but for a GPU --device: `check_device`). A Hub checkpoint that is to be downloaded has the
    device and its tokenizer checked first."""
    value = str(policy_value(args))
    download = hub_download_of(value, args.random_weights, base_weights=True)
    if download is not None:  # before gigabytes of weights download: the device, and the tokenizer they need
        check_device(args)
        check_tokenizer_first(args, download)
    source = policy_source(args, "serve", ACCEPTED, base_weights=True)
    directory = source.kind is PolicyKind.DIRECTORY
    check_checkpoint_files(args, source.path if directory else None, source.layout if directory else None)
    if download is None:
        check_device(args)
    random_dims = {k: v for k, v in {"action_dims": args.action_dims, "state_dims": args.state_dims}.items() if v}
    if random_dims and (args.ray or source.kind is not PolicyKind.PRESET):
        raise ConfigError("--action-dims and --state-dims shape one server's --random-weights policy: not a "
                          "checkpoint, which has its own, nor a --ray fleet")  # fmt: skip
    if args.ray:
        _check_fleet_flags(args)
        return CheckedArgs(source, None, None)
    fleet_only = given_flags(args, FLEET_ONLY)
    if fleet_only:
        raise ConfigError(f"{', '.join(fleet_only)} configure a Ray Serve fleet: add --ray")
    config = SERVER_FLAGS.build(args, warm_up_runs=0 if args.no_warmup else WARM_UP_RUNS)  # see its warm_up_runs
    check_zmq_bind(config.bind, "--bind")
    openpi = OPENPI_FLAGS.build(args)
    if "port" not in OPENPI_FLAGS.given(args):  # no openpi endpoint unless its port is given
        return CheckedArgs(source, config, None, random_dims)
    openpi.check_access(config)  # no authentication: a reachable host, or CurveZMQ keys, needs --insecure
    check_tcp_port(openpi.host, openpi.port, "--openpi-port")
    return CheckedArgs(source, config, openpi, random_dims)


def check_device(args: argparse.Namespace) -> None:
    """A GPU --device (cuda, a GPU profile, jetson) needs a torch that sees a GPU: one line naming the torch build
    found and the one needed (vlash.devices.cuda_check; imports torch, so path errors come first). A fleet's
    replicas decide their device on their own nodes."""
    if not args.ray and wants_cuda(args.device):
        check_cuda(args.device)


def _check_fleet_flags(args: argparse.Namespace) -> None:
    """--ray: no ZeroMQ server flags; the ingress needs a fixed port, free unless the cluster is elsewhere."""
    zmq_only = given_flags(args, ZMQ_ONLY)
    if zmq_only:
        raise ConfigError(f"{', '.join(zmq_only)} configure the ZeroMQ server, which --ray does not start")
    SERVER_FLAGS.build(args)  # the settings a fleet shares with the server, checked as the server checks them
    ingress = OPENPI_FLAGS.build(args)
    host, port = ingress.host, ingress.port
    if port == 0:
        raise ConfigError("--openpi-port 0: Ray Serve's HTTP proxy needs a fixed port with --ray")
    # the ingress has no authentication (a fleet has no CurveZMQ keys): the openpi endpoint's rule, for a reachable host
    fix = "listen on 127.0.0.1 (--openpi-host)"
    check_unauthenticated(f"openpi ingress {host}:{port}", not is_loopback_host(host), False, args.insecure, fix)
    if args.ray_address is None:
        check_tcp_port(host, port, "--openpi-port")
