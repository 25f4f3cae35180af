"""`vlash serve` once its arguments are checked (vlash.cli.serve_cmd): the device and engine settings, the policy
load, and serving until SIGINT / SIGTERM (ZeroMQ, the openpi endpoint, or a Ray Serve fleet)."""

from __future__ import annotations

import argparse
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from robot_io.stop_signals import handle_stop_signals
from vlash.cli.checkpoint_args import checkpoint_options
from vlash.cli.cpu_threads import server_threads
from vlash.cli.engine_args import torch_engine_options
from vlash.cli.flags import build_config
from vlash.cli.serve_args import (
    FLEET_FLAGS,
    FLEET_SHARED,
    OPENPI_FLAGS,
    SERVER_FLAGS,
    CheckedArgs,
    check_args,
)
from vlash.devices import is_profile_name, load_profile, resolve_device
from vlash.engines.artifact import ArtifactManifest
from vlash.errors import ConfigError
from vlash.fleet.config import FleetConfig
from vlash.policies.formats.base import CheckpointOptions
from vlash.policies.names.source import PolicyKind, PolicySource, looks_like_path
from vlash.runtime.loading import LoadedRuntime, load_runtime
from vlash.runtime.metadata import policy_metadata
from vlash.server.config import OpenpiConfig, ServerConfig
from vlash.server.openpi_endpoint import OpenpiEndpoint
from vlash.server.server import PolicyServer


@dataclass
class ServePlan:
    """Everything `vlash serve` was told, checked before the policy loads."""

    source: PolicySource
    engine: str  # engine name: --engine, else an artifact's own, else torch
    threads: int  # CPU threads of torch and onnxruntime
    config: ServerConfig  # the ZeroMQ server's settings (vlash.cli.serve_args.check_args)
    openpi: OpenpiConfig | None
    options: CheckpointOptions
    engine_options: dict  # the torch engine's compile_mode and graphs
    random_dims: dict  # --random-weights: its action_dims and state_dims (empty: the preset's defaults)


def policy_plan(args: argparse.Namespace, source: PolicySource) -> tuple[str, CheckpointOptions, dict]:
    """The policy's engine, checkpoint options and torch engine options, checked (one-line errors, no weights
    loaded)."""
    engine = args.engine or "torch"
    if source.kind is PolicyKind.ARTIFACT:
        exported = ArtifactManifest.load(source.path).engine
        engine = args.engine or exported
        if engine == "torch":
            raise ConfigError(
                f"{source.flag} {source.value!r} is an exported artifact: serve it with --engine {exported}"
            )
    options = checkpoint_options(args)
    if options != CheckpointOptions():
        unused = options.unused_by(source.layout) if source.kind is PolicyKind.DIRECTORY else ["options"]
        if unused:
            raise ConfigError(
                "--tokenizer, --model-config, --asset-id, --no-state-in-prompt and --relative-mask describe LeRobot "
                f"/ openpi directories; {source.flag} {source.value!r} is {source.describe()}, which takes no "
                f"{', '.join(unused)}"
            )
    profile = load_profile(args.device) if is_profile_name(args.device) else None
    if args.ray:  # the replicas' device, decided on them (this node may have no GPU); FleetConfig checks it
        device = torch.device(profile.device if profile else "cpu" if args.device == "cpu" else "cuda")
    else:  # a GPU on a torch that sees none: one line naming the build (vlash.devices.cuda_check)
        device = resolve_device(args.device)
    return engine, options, torch_engine_options(args, engine, device, profile)


def plan(args: argparse.Namespace, checked: CheckedArgs | None = None) -> ServePlan:
    """Every argument, endpoint and port checked (`checked`: serve_args.check_args's, else checked here), and the
    engine settings: one-line errors, no weights loaded."""
    checked = checked or check_args(args)
    engine, options, engine_options = policy_plan(args, checked.source)
    threads = server_threads(args.threads)
    return ServePlan(
        checked.source, engine, threads, checked.config, checked.openpi, options, engine_options, checked.random_dims
    )


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
        served.config.steps,
        served.config.schedule,
        served.options,
        allow_failed_gate=args.allow_failed_gate,
        threads=served.threads,
        random_dims=served.random_dims,
        guidance_weight=served.config.guidance_weight,
        **served.engine_options,
    )


def served_name(source: PolicySource, loaded_name: str) -> str:
    """How the banner and the clients' metadata name the policy: a Hub checkpoint by its repo id and a directory
    by its path as the user wrote it (not the snapshot's commit hash, nor LeRobot's "pretrained_model"); a shipped
    policy, an artifact or random weights by the name the load gave them (`loaded_name`)."""
    if source.hub_id is not None:
        return source.hub_id
    return source.value if source.kind is PolicyKind.DIRECTORY else loaded_name


def serve(args: argparse.Namespace, checked: CheckedArgs | None = None) -> int:
    """Load the policy and serve it over ZeroMQ (and the openpi endpoint) until SIGINT / SIGTERM."""
    served = plan(args, checked)
    torch.set_num_threads(served.threads)
    loaded = load(served, args)
    config, openpi_config = served.config, served.openpi
    runtime = loaded.runtime
    stop = threading.Event()  # SIGINT / SIGTERM, or a serving thread that died (the server then stops itself)
    name = served_name(served.source, loaded.model_id)
    metadata = policy_metadata(runtime, name, served.engine, loaded.precision)
    server = PolicyServer(runtime, metadata, config, on_failure=lambda exc: stop.set())
    with handle_stop_signals(lambda signum: stop.set()):  # the handlers before it come back when serving ends
        endpoint = server.start()
        openpi = None
        try:
            if openpi_config is not None:  # openpi websocket clients, each through its own client of this server
                openpi = OpenpiEndpoint(server, openpi_config)
                print(f"vlash serve: openpi clients on {openpi.start()} (observations: {openpi.map_name})", flush=True)
            print(  # the last startup line: everything is listening once it is out
                f"vlash serve: {name} ({loaded.params / 1e6:.1f}M params, {loaded.precision}) "
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


def fleet_message_flags() -> dict[str, str]:
    """FleetConfig field -> the `vlash serve` flag that gives it, as its errors name them."""
    openpi = {f"openpi_{name}": flag for name, flag in OPENPI_FLAGS.flags().items()}
    hand_written = {name: f"--{name}" for name in ("device", "dtype", "engine")}
    return {**SERVER_FLAGS.flags(), **FLEET_FLAGS.flags(), **openpi, **hand_written}


def run_fleet(args: argparse.Namespace, checked: CheckedArgs | None = None) -> int:
    """`vlash serve --ray`: the policy on Ray Serve (vlash.fleet) until SIGINT / SIGTERM."""
    source = (checked or check_args(args)).source
    try:
        from vlash.fleet.app import serve_fleet  # extra: fleet
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("ray", "fastapi", "starlette"):
            raise
        raise ConfigError(
            f"vlash serve --ray needs Ray Serve ({exc.name} is missing): pip install 'vlash[fleet]'"
        ) from None
    engine, options, engine_options = policy_plan(args, source)
    named = source.kind in (PolicyKind.PRESET, PolicyKind.SHIPPED)  # a name: found on every node
    policy = str(Path(source.value).resolve()) if named and looks_like_path(source.value) else source.value
    # --device auto: no GPU here, decided once Ray is up (serve_fleet's auto_gpus: where the replicas can have one)
    fleet_given = FLEET_FLAGS.given(args)
    auto_gpus = args.device == "auto" and "num_gpus" not in fleet_given
    openpi = OPENPI_FLAGS.build(args)  # the ingress's host, port and observation map (checked: check_args)
    shared = {name: value for name, value in SERVER_FLAGS.given(args).items() if name in FLEET_SHARED}
    values = {
        "policy": policy if named else None,
        "checkpoint": None if named else str(Path(source.path).resolve()),
        "random_weights": source.kind is PolicyKind.PRESET,
        "device": args.device,
        "dtype": args.dtype,
        "engine": engine,
        **engine_options,
        "checkpoint_options": options,
        "allow_failed_gate": args.allow_failed_gate,
        **({"warm_up_runs": 0} if args.no_warmup else {}),
        "num_gpus": float(args.device.startswith("cuda")),
        **shared,
        **fleet_given,
        "openpi_profile": openpi.profile,
        "openpi_map_file": None if openpi.map_file is None else str(openpi.map_file),
    }
    config = build_config(FleetConfig, values, fleet_message_flags())
    host, port = openpi.host, openpi.port

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
