"""The fleet as a Ray Serve application: an openpi ingress in front of N model replicas.

serve run configs/ray/pi05_tiny.yaml      # Ray's CLI: imports build_app with the file's `args:`
vlash serve --ray --policy pi05-tiny --random-weights --num-replicas 2 --openpi-port 8000
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

import ray
import torch
from ray import serve
from ray.serve import Application

from vlash.fleet.config import FleetConfig
from vlash.fleet.ingress import OpenpiIngress
from vlash.fleet.model import ModelReplica

APP_NAME = "vlash"  # the Serve application's name (serve status, serve.delete)
# Serve's controller kills an HTTP proxy not ready within this many seconds (Ray's default 5), and serve.start then
# fails with ActorDiedError; on a loaded 2-core machine or a Jetson the proxy can take longer to start.
PROXY_READY_TIMEOUT_ENV, PROXY_READY_TIMEOUT_S = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60"
# On SIGINT or SIGTERM, Serve's graceful stop gets this long (the ingress replicas close the robots' websockets, about
# 2 s; requests in flight end with them); then a Ray started here is shut down, which ends what is left. Serve's own
# wait is 30 s, and open websockets held it past that (45 s in all, "Controller failed to shut down within 30.0s");
# Ctrl-C in a terminal was quicker only because it reaches Ray's processes too.
SERVE_STOP_S = 3.0


def allow_slow_proxy_start() -> None:
    """Give the HTTP proxy of a Ray started after this call PROXY_READY_TIMEOUT_S to become ready, unless the user
    set PROXY_READY_TIMEOUT_ENV. Call before ray.init: the local instance's processes inherit the environment (an
    existing cluster keeps its own)."""
    os.environ.setdefault(PROXY_READY_TIMEOUT_ENV, PROXY_READY_TIMEOUT_S)


def log_settings(stream: TextIO) -> dict[str, Any] | None:
    """Serve's logging_config for a driver that logs to `stream` (its stderr): None on a terminal (Ray's own). On
    anything else (a service's log, a file) no colour codes (RAY_COLOR_PREFIX=0, unless the user set it: Ray colours
    the lines it forwards whatever the stream) and no access line per request (Serve's, one per chunk of every robot:
    the flood); warnings, errors and vlash's own lines still come through."""
    if stream.isatty():
        return None
    os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    return {"enable_access_log": False}


def stop_serve(started_ray: bool, timeout_s: float) -> None:
    """Stop the fleet within about `timeout_s`: on a Ray started here, Serve stops gracefully while that lasts (the
    caller's ray.shutdown then ends what is left); on a cluster, the application is deleted without waiting (the
    cluster's controller finishes it)."""
    if not started_ray:
        serve.delete(APP_NAME, _blocking=False)
        return
    with contextlib.suppress(TimeoutError):  # usual with robots connected: the replicas left end with Ray
        asyncio.run(asyncio.wait_for(serve.shutdown_async(), timeout_s))


def fleet_app(config: FleetConfig) -> Application:
    """The application `config` describes: its replica counts, autoscaling and resources."""
    replicas: dict[str, Any] = {"autoscaling_config": config.autoscaling}
    if config.autoscaling is None:
        replicas = {"num_replicas": config.num_replicas}
    model = ModelReplica.options(
        **replicas,
        ray_actor_options=config.replica_actor_options,
        max_ongoing_requests=config.ongoing_requests,
    ).bind(config)
    ingress = OpenpiIngress.options(
        num_replicas=config.ingress_replicas, ray_actor_options={"num_cpus": config.ingress_num_cpus}
    )
    return ingress.bind(model, config)


def build_app(args: dict[str, Any]) -> Application:
    """`serve run`'s import path (vlash.fleet.app:build_app): the `args:` mapping is a FleetConfig."""
    return fleet_app(FleetConfig.from_mapping(dict(args or {}), "serve run args"))


def auto_replica_gpus(address: str | None) -> float:
    """GPUs per replica for `vlash serve --ray --device auto` (Ray connected): 1 where replicas find a GPU, as
    `vlash serve` picks cuda when torch sees one: a Ray started here, when this machine's torch sees CUDA (and Ray
    found the GPU); a cluster at `address`, when it has GPU resources (the driver's own devices say nothing of its
    nodes'). Else 0: the replicas run on the CPU."""
    cluster_gpus = ray.cluster_resources().get("GPU", 0.0)
    return 1.0 if cluster_gpus >= 1 and (address is not None or torch.cuda.is_available()) else 0.0


def serve_fleet(
    config: FleetConfig,
    host: str,
    port: int,
    address: str | None = None,
    on_ready: Callable[[str, FleetConfig], None] | None = None,
    auto_gpus: bool = False,
) -> bool:
    """Run the fleet until SIGINT or SIGTERM (call from the main thread), either one stopping it the same way, in about
    SERVE_STOP_S (`stop_serve`): on the cluster at `address` (None: a local Ray started here and shut down at the end),
    its HTTP proxy on host:port, logging as `log_settings` says for this process's stderr. `auto_gpus` (`config` has
    device auto and num_gpus 0): once Ray is up, one GPU per replica where `auto_replica_gpus` finds them.
    `on_ready(url, config)` gets the robots' ws:// URL and the config served once every replica runs. False when a
    signal came before that (the start was abandoned, cleaned up)."""
    stop, waiting = threading.Event(), threading.Event()  # waiting: in serve.run's wait for the replicas

    def on_signal(*_: object) -> None:
        stop.set()
        if waiting.is_set():  # a wait loop, safe to leave; ray.init and serve.start are left to finish
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    started_ray = not ray.is_initialized() and address is None
    logs = log_settings(sys.stderr)  # before ray.init: the lines it forwards
    ready = False
    try:
        if not ray.is_initialized():
            allow_slow_proxy_start()
            ray.init(address=address, include_dashboard=False if address is None else None)
            for sig in previous:  # ray.init sets its own SIGTERM handler (sys.exit): ours again
                signal.signal(sig, on_signal)
        if auto_gpus and auto_replica_gpus(address) > 0:
            config = dataclasses.replace(config, device="auto", num_gpus=1.0)
        serve.start(http_options={"host": host, "port": port})
        if not stop.is_set():
            waiting.set()
            serve.run(fleet_app(config), name=APP_NAME, route_prefix="/", logging_config=logs)  # every replica runs
            waiting.clear()
            ready = True
            if on_ready is not None:
                on_ready(f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}", config)
            stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        waiting.clear()
        if ray.is_initialized():  # not when ray.init was interrupted (serve would start a Ray to shut down)
            stop_serve(started_ray, SERVE_STOP_S)
        if started_ray:
            ray.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return ready
