"""`vlash serve`'s command line and every check that needs no model code: the policy and the files named, the
endpoints and ports, run before torch is imported, so a wrong path is reported at once (vlash.cli.serve_cmd runs
them, then vlash.cli.serve_run loads the policy and serves it).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from vlash.cli.checkpoint_args import CHECKPOINT_FLAGS, check_checkpoint_files, check_tokenizer_first
from vlash.cli.command import Command
from vlash.cli.cpu_threads import RULE
from vlash.cli.engine_args import torch_engine_flags
from vlash.cli.flags import ConfigFlags, given_dests
from vlash.cli.policy_args import POLICY_OR_CHECKPOINT, policy_flags, policy_source, policy_value
from vlash.cli.preflight import check_tcp_port, check_zmq_bind, positive_int
from vlash.devices import available_profiles
from vlash.devices.cuda_check import check_cuda, wants_cuda
from vlash.engines import available_engines
from vlash.errors import ConfigError
from vlash.fleet.config import FleetConfig
from vlash.policies.names.source import PolicyKind, PolicySource, hub_download_of
from vlash.policies.pi05.dtypes import DTYPE_NAMES
from vlash.server.config import OpenpiConfig, ServerConfig, check_unauthenticated, is_loopback_host

# full requests a served policy runs before serving, as a fleet's replica does (ServerConfig's own default, 0, suits
# a server embedded in a test or a tool)
WARM_UP_RUNS = FleetConfig.warm_up_runs


@dataclass(frozen=True)
class ServeOptions:
    """How `vlash serve` runs the policy (the server's own settings are ServerConfig's)."""

    # cpu, cuda, cuda:N, auto (cuda when torch sees a GPU; with --ray: when the replicas can have one), or a device
    # profile (configs/devices/; jetson: the Jetson this is)
    device: str = "auto"
    dtype: str | None = field(default=None, metadata={"choices": tuple(sorted(DTYPE_NAMES))})  # the weights' precision
    engine: str | None = field(default=None, metadata={"choices": tuple(available_engines())})  # what runs the model
    threads: int | None = field(default=None, metadata={"parse": positive_int})  # CPU threads for torch and onnxruntime
    stats_every: float = field(default=30.0, metadata={"metavar": "S"})  # print stats every S s (0: never)
    no_warmup: bool = False  # skip the warm-up requests
    allow_failed_gate: bool = False  # serve a quantized artifact whose fidelity check (vlash quantize --check) failed
    # --random-weights: the robot's action entries (default 2), to try a robot's wiring before its policy exists
    action_dims: int | None = field(default=None, metadata={"parse": positive_int})
    # --random-weights: the robot's state entries (default: --action-dims)
    state_dims: int | None = field(default=None, metadata={"parse": positive_int})
    ray: bool = False  # serve the policy as a Ray Serve fleet (pip install 'vlash[fleet]'): no ZeroMQ endpoint
    # a running Ray cluster (default: start one)
    ray_address: str | None = field(default=None, metadata={"metavar": "ADDR"})


SERVE_FLAGS = ConfigFlags(
    ServeOptions,
    "device dtype engine threads",
    title="server",
    notes={
        "device": f"({', '.join(available_profiles())})",
        "dtype": "(default: bf16 on cuda, fp32 on cpu)",
        "engine": "(default: an artifact's own engine, else torch)",
        "threads": f"(default: {RULE})",
        "no_warmup": f"({WARM_UP_RUNS} full requests)",
    },
    advanced="stats_every no_warmup allow_failed_gate action_dims state_dims",
)
# The server's, the openpi endpoint's and the fleet's settings: flags of their configs (vlash.cli.flags)
SERVER_FLAGS = ConfigFlags(
    ServerConfig,
    "bind insecure curve_keys allow_dir max_batch batch_wait_ms max_pending",
    title="server",
    advanced="schedule steps guidance_weight inject_latency_ms",
)
OPENPI_FLAGS = ConfigFlags(
    OpenpiConfig,
    "port host profile map_file",
    prefix="openpi_",
    title="openpi clients",
    description="openpi's websocket protocol, adapted onto this server",
    notes={"port": "(given: openpi clients are served; with --ray always, on the ingress's port, default: {default})"},
    advanced="max_connections refusal_delay_s",
    late=True,
)
FLEET_FLAGS = ConfigFlags(
    FleetConfig,
    "num_replicas num_gpus",
    title="a fleet on Ray Serve",
    description="model replicas behind an openpi websocket ingress on --openpi-host/--openpi-port, batching as "
    "--max-batch and --batch-wait-ms say; no ZeroMQ endpoint",
    notes={"num_gpus": "(default: 1 with --device cuda, and with auto when the replicas can have one; else 0)"},
    late=True,
)
RAY_FLAGS = ConfigFlags(ServeOptions, "ray ray_address", title="a fleet on Ray Serve", late=True)
RENAMED = {
    "--inject-latency": "--inject-latency-ms",
    "--allow": "--allow-dir",
    "--openpi-map": "--openpi-map-file",
    "--replicas": "--num-replicas",
    "--replica-gpus": "--num-gpus",
}


ACCEPTED = {
    PolicyKind.SHIPPED: "",
    PolicyKind.DIRECTORY: "",
    PolicyKind.ARTIFACT: "run by its engine",
    PolicyKind.PRESET: "with --random-weights",
}


COMMAND = Command(
    "serve",
    "serve a policy to robot clients over ZeroMQ",
    "Serve a policy to robot clients over ZeroMQ (and openpi clients over websockets with --openpi-port), or as a "
    "Ray Serve fleet (--ray).",
    (
        policy_flags("the policy to serve", ACCEPTED, checkpoint=True, random_weights=True),
        SERVE_FLAGS,
        SERVER_FLAGS,
        OPENPI_FLAGS,
        RAY_FLAGS,
        FLEET_FLAGS,
        torch_engine_flags(),
        CHECKPOINT_FLAGS,
    ),
    RENAMED,
    exclusive=POLICY_OR_CHECKPOINT,
    required_one_of=POLICY_OR_CHECKPOINT,
)


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
