"""A fleet on Ray Serve (vlash.fleet): per-request replies of a batch, the config and the `serve run` file, and a
local Ray cluster over loopback: two model replicas of a micro policy behind the openpi ingress, three simulated
robots driving it, one replica killed, every robot served on and the replica count restored.

Skipped without Ray (`pip install 'vlash[fleet]'`)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

import vlash.fleet.app as fleet_app_module  # noqa: E402
from robot_io.protocol import Infer  # noqa: E402
from tests.server.conftest import PROMPT, STEPS, make_runtime, write_policy  # noqa: E402
from tests.server.test_openpi_endpoint import OpenpiTestClient  # noqa: E402
from vlash.errors import ConfigError  # noqa: E402
from vlash.fleet.app import (  # noqa: E402
    APP_NAME,
    PROXY_READY_TIMEOUT_ENV,
    allow_slow_proxy_start,
    auto_replica_gpus,
    build_app,
    fleet_app,
)
from vlash.fleet.batch import RequestFailed, replies  # noqa: E402
from vlash.fleet.config import FleetConfig  # noqa: E402
from vlash.fleet.ingress import MAX_RETRIES, OpenpiIngress  # noqa: E402
from vlash.fleet.model import ModelReplica  # noqa: E402
from vlash.runtime.policy_runtime import make_infer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SERVE_RUN_CONFIG = ROOT / "configs" / "ray" / "pi05_tiny.yaml"
ROBOTS = 3
MORE_CHUNKS = 3  # each robot's chunks after the kill
KILLS = 3  # replicas killed at most until one kill lands on requests in flight (see the test)
WAIT_S = 60.0  # the longest any wait here takes, but the fleet's start
# Ray, Serve and three replica processes (each importing torch) on 2 cores that other tests keep busy: past 60 s
# in two suite runs beside a busy core (replicas not even scheduled after 30 s)
START_S = 180.0
BATCH_WAIT_MS = 300.0  # the fleet's batching wait (see the fleet fixture)


# --- batches: one reply per request -------------------------------------------------------------------------
class FakeRuntime:
    """`run` fails on prompts starting with "bad" (ValueError) or "bug" (RuntimeError); "nan" returns NaN.
    `run_batch` gives each request its result or its exception, as PolicyRuntime.run_batch does."""

    def __init__(self, horizon: int = 4) -> None:
        self.horizon = horizon

    def run_batch(self, requests):
        outcomes = []
        for request in requests:
            try:
                outcomes.append(self.run(request))
            except Exception as exc:  # noqa: BLE001 - the request's own outcome
                outcomes.append(exc)
        return outcomes

    def run(self, request: Infer):
        from vlash.runtime.policy_runtime import ChunkResult

        if request.prompt.startswith("bad"):
            raise ValueError("state: expected 2 dims")
        if request.prompt.startswith("bug"):
            raise RuntimeError("CUDA error: an illegal memory access")
        value = np.nan if request.prompt == "nan" else float(request.state[0])
        actions = np.full((self.horizon, 2), value, np.float32)
        return ChunkResult(actions, np.zeros(self.horizon, np.int64), 1, self.horizon, 0, {"total_ms": 1.0})


def _request(prompt: str, x: float = 0.0) -> Infer:
    return make_infer({}, np.array([x, 0.0], np.float32), prompt)


def test_a_failed_request_is_its_own_reply_and_never_the_batchs():
    runtime = FakeRuntime()
    requests = [_request("go", 1.0), _request("bad"), _request("bug"), _request("nan"), _request("go", 2.0)]
    out = replies(runtime, requests)
    assert [float(out[i].actions[0, 0]) for i in (0, 4)] == [1.0, 2.0]
    assert out[1] == RequestFailed("state: expected 2 dims", internal=False)
    assert out[2] == RequestFailed("RuntimeError: CUDA error: an illegal memory access", internal=True)
    assert isinstance(out[3], RequestFailed) and out[3].internal and "NaN" in out[3].message


def test_one_run_batch_call_per_batch_and_its_failure_fails_every_request():
    class Batched(FakeRuntime):
        calls: list[int] = []

        def run_batch(self, requests):
            self.calls.append(len(requests))
            if any(r.prompt == "crash" for r in requests):
                raise RuntimeError("device lost")
            return super().run_batch(requests)

    runtime = Batched()
    assert len(replies(runtime, [_request("go"), _request("go")])) == 2 and Batched.calls == [2]
    out = replies(runtime, [_request("go"), _request("crash")])
    assert out == [RequestFailed("RuntimeError: device lost", internal=True)] * 2


def test_health_fails_after_failed_batches_in_a_row_or_a_hung_batch():
    model = object.__new__(ModelReplica.func_or_class)  # the health logic only, no runtime
    model.config = FleetConfig(policy="pi05-tiny", random_weights=True, unhealthy_after=2, infer_timeout_s=1.0)
    model.failures_in_a_row, model.broken, model._batch_started = 0, None, None
    bug, bad = RequestFailed("RuntimeError: x", internal=True), RequestFailed("bad state", internal=False)
    served = FakeRuntime().run(_request("go"))
    model._count([bug] * 5)  # one batch: one failure, however many of its requests failed
    model.check_health()
    for batch in ([bad, bad], [bug, served], [bug, bad]):  # bad requests count not, a success resets
        model._count(batch)
    assert model.failures_in_a_row == 1
    model.check_health()
    model._count([bug])
    with pytest.raises(RuntimeError, match="2 batches in a row"):
        model.check_health()
    model.failures_in_a_row, model.broken, model._batch_started = 0, None, time.monotonic() - 2.0
    with pytest.raises(RuntimeError, match="infer_timeout_s"):
        model.check_health()


# --- the ingress's calls to the model deployment ----------------------------------------------------------------
class FakeResponse:
    """A DeploymentResponse that raises or returns `outcome` (None: never answers)."""

    def __init__(self, outcome) -> None:
        self.outcome, self.cancelled = outcome, False

    def __await__(self):
        yield from asyncio.sleep(0 if self.outcome is not None else 3600).__await__()
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def cancel(self) -> None:
        self.cancelled = True


class FakeModel:
    """A DeploymentHandle whose `infer` calls end as `outcomes` says, one per call."""

    def __init__(self, *outcomes) -> None:
        self.outcomes, self.sent = list(outcomes), []

    @property
    def infer(self):
        return self

    def remote(self, request):
        self.sent.append(FakeResponse(self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]))
        return self.sent[-1]


def _ingress(model: FakeModel, timeout_s: float) -> SimpleNamespace:
    """What OpenpiIngress._call and _infer read of their replica (the call logic only, no Ray)."""
    config = FleetConfig(policy="pi05-tiny", random_weights=True, infer_timeout_s=timeout_s)
    ingress = SimpleNamespace(model=model, config=config, retries=0)
    ingress._call = lambda *args: OpenpiIngress.func_or_class._call(ingress, *args)
    return ingress


def _infer(ingress: SimpleNamespace) -> object:
    return asyncio.run(OpenpiIngress.func_or_class._call(ingress, "infer", _request("go")))


def test_the_ingress_retries_a_dead_replica_within_the_timeout():
    from ray.exceptions import ActorDiedError, ActorUnavailableError

    from robot_io.protocol.errors import DeadlineExceeded

    ingress = _ingress(FakeModel(ActorDiedError(), ActorUnavailableError("gone", None), "chunk"), timeout_s=5.0)
    assert _infer(ingress) == "chunk" and ingress.retries == 2
    no_replica_in_time = _ingress(FakeModel(ActorDiedError()), timeout_s=0.1)  # retried after 50 ms, then not
    with pytest.raises(DeadlineExceeded, match="no live model replica"):
        _infer(no_replica_in_time)
    assert no_replica_in_time.retries == 1
    hung = _ingress(FakeModel(None), timeout_s=0.2)
    with pytest.raises(DeadlineExceeded, match="no reply from the policy within 0.2 s"):
        _infer(hung)
    assert hung.model.sent[0].cancelled and hung.retries == 0
    other = _ingress(FakeModel(KeyError("a bug")), timeout_s=5.0)  # not a replica failure: no retry
    with pytest.raises(KeyError):
        _infer(other)
    assert other.retries == 0


def test_a_request_that_kills_its_replicas_is_retried_at_most_twice_then_answered_with_the_error():
    from ray.exceptions import ActorDiedError

    killer = _ingress(FakeModel(ActorDiedError()), timeout_s=30.0)
    start = time.monotonic()
    reply = asyncio.run(OpenpiIngress.func_or_class._infer(killer, _request("go")))
    assert isinstance(reply, RequestFailed) and reply.internal and "failed 3 times" in reply.message
    assert MAX_RETRIES == 2 and killer.retries == 2 and len(killer.model.sent) == 3
    assert time.monotonic() - start < 5.0  # not the 30 s timeout


# --- configuration --------------------------------------------------------------------------------------------
def test_the_serve_run_file_is_a_valid_serve_config_that_builds_the_fleet():
    from ray.serve.schema import ServeDeploySchema

    doc = yaml.safe_load(SERVE_RUN_CONFIG.read_text())
    (app,) = ServeDeploySchema.model_validate(doc).applications
    assert app.import_path == "vlash.fleet.app:build_app"
    config = FleetConfig.from_mapping(app.args)
    assert (config.policy, config.random_weights, config.device, config.num_replicas) == ("pi05-tiny", True, "cpu", 2)
    assert isinstance(build_app(app.args), serve.Application)


def test_fleet_config_refuses_what_ray_cannot_run():
    with pytest.raises(ConfigError, match="unknown fleet keys"):
        FleetConfig.from_mapping({"policy": "pi05-tiny", "replicas": 2})
    with pytest.raises(ConfigError, match="set num_gpus"):
        FleetConfig(policy="pi05-tiny", device="cuda")  # a GPU replica must reserve its GPU
    with pytest.raises(ConfigError, match="Ray gives each replica its GPU"):
        FleetConfig(policy="pi05-tiny", device="cuda:1", num_gpus=1)
    with pytest.raises(ConfigError, match="exactly one of policy and checkpoint"):
        FleetConfig()
    with pytest.raises(ConfigError, match="relative_mask"):
        FleetConfig(checkpoint="/x", checkpoint_options={"relative_mask": "1,0"})
    assert FleetConfig(policy="pi05-tiny", num_gpus=1).device == "cuda"


def test_replicas_get_sleeping_openmp_workers_unless_the_user_chose(monkeypatch):
    """The replicas are Ray's processes, not `vlash serve`'s: the wait policy reaches them through runtime_env."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    options = FleetConfig(policy="pi05-tiny", num_cpus=2).replica_actor_options
    assert options["num_cpus"] == 2 and options["runtime_env"] == {"env_vars": {"OMP_WAIT_POLICY": "PASSIVE"}}
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert FleetConfig(policy="pi05-tiny").replica_actor_options["runtime_env"]["env_vars"]["OMP_WAIT_POLICY"] == (
        "ACTIVE"
    )


def test_a_local_rays_http_proxy_gets_a_minute_to_start_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv(PROXY_READY_TIMEOUT_ENV, raising=False)
    allow_slow_proxy_start()
    assert os.environ[PROXY_READY_TIMEOUT_ENV] == "60"
    monkeypatch.setenv(PROXY_READY_TIMEOUT_ENV, "7")
    allow_slow_proxy_start()
    assert os.environ[PROXY_READY_TIMEOUT_ENV] == "7"


def test_vlash_serve_keeps_the_fleet_flags_and_the_zeromq_flags_apart():
    import vlash.cli.serve_cmd as serve_cmd
    from vlash.cli.main import parse_args

    preset = ["serve", "--policy", "pi05-tiny", "--random-weights"]
    with pytest.raises(ConfigError, match="--num-replicas configure a Ray Serve fleet: add --ray"):
        serve_cmd.check_args(parse_args([*preset, "--num-replicas", "2"]))
    with pytest.raises(ConfigError, match="--bind, --threads configure the ZeroMQ server"):
        serve_cmd.run(parse_args([*preset, "--ray", "--bind", "tcp://127.0.0.1:6000", "--threads", "2"]))
    with pytest.raises(ConfigError, match="needs a fixed port"):
        serve_cmd.run(parse_args([*preset, "--ray", "--openpi-port", "0"]))


def test_a_reachable_ingress_needs_insecure(monkeypatch):
    """The ingress has no authentication: `--openpi-host 0.0.0.0` needs --insecure, as `vlash serve`'s endpoint does."""
    import vlash.cli.serve_cmd as serve_cmd
    from vlash.cli.main import parse_args

    hosts = []
    monkeypatch.setattr(fleet_app_module, "serve_fleet", lambda config, host, *rest: hosts.append(host) or True)
    reachable = ["serve", "--ray", "--policy", "pi05-tiny", "--random-weights", "--openpi-host", "0.0.0.0"]
    reachable += ["--openpi-port", str(_free_port())]
    with pytest.raises(ConfigError, match="openpi ingress 0.0.0.0:.* reachable from other machines.*--insecure"):
        serve_cmd.run(parse_args(reachable))
    assert hosts == [] and serve_cmd.run(parse_args([*reachable, "--insecure"])) == 0 and hosts == ["0.0.0.0"]


def test_device_auto_gives_replicas_a_gpu_where_they_can_have_one(monkeypatch):
    import torch

    def cluster(gpus: float, torch_sees_cuda: bool) -> None:
        monkeypatch.setattr(fleet_app_module.ray, "cluster_resources", lambda: {"CPU": 8.0, "GPU": gpus})
        monkeypatch.setattr(torch.cuda, "is_available", lambda: torch_sees_cuda)

    cluster(2.0, True)
    assert auto_replica_gpus(None) == 1.0 and auto_replica_gpus("auto") == 1.0
    cluster(2.0, False)  # a cluster's nodes have GPUs the driver need not see; a Ray started here needs torch's
    assert auto_replica_gpus("auto") == 1.0 and auto_replica_gpus(None) == 0.0
    cluster(0.0, True)  # no GPU resource in Ray: a replica reserving one would never start
    assert auto_replica_gpus(None) == 0.0 and auto_replica_gpus("ray://head:10001") == 0.0


def test_vlash_serve_ray_passes_device_auto_on_to_the_fleet(monkeypatch, capsys):
    import vlash.cli.serve_cmd as serve_cmd
    from vlash.cli.main import parse_args

    calls = []

    def serve_fleet(config, host, port, address, on_ready, auto_gpus):
        calls.append((config, auto_gpus))
        on_ready(f"ws://{host}:{port}", config)
        return True

    monkeypatch.setattr(fleet_app_module, "serve_fleet", serve_fleet)
    preset = ["serve", "--ray", "--policy", "pi05-tiny", "--random-weights", "--openpi-port", str(_free_port())]
    for flags in ([], ["--device", "cpu"], ["--device", "cuda"], ["--num-gpus", "0"]):
        assert serve_cmd.run(parse_args([*preset, *flags])) == 0
    (auto, auto_gpus), (cpu, cpu_auto), (cuda, cuda_auto), (none, none_auto) = calls
    assert auto_gpus and (auto.device, auto.num_gpus) == ("cpu", 0.0)  # decided once Ray is up
    assert not cpu_auto and (cpu.device, cpu.num_gpus) == ("cpu", 0.0)
    assert not cuda_auto and (cuda.device, cuda.num_gpus) == ("cuda", 1.0)
    assert not none_auto and (none.device, none.num_gpus) == ("cpu", 0.0)
    assert "1 GPU each, device=cuda" in capsys.readouterr().out  # the startup line names what was served


def test_vlash_serve_ray_without_ray_names_the_extra():
    block_ray = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'ray':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from vlash.cli.main import main\n"
        "sys.exit(main(['serve', '--ray', '--policy', 'pi05-tiny', '--random-weights']))\n"
    )
    out = subprocess.run([sys.executable, "-c", block_ray], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "vlash serve --ray needs Ray Serve" in out.stderr and "pip install 'vlash[fleet]'" in out.stderr


# --- stopping: SIGTERM as Ctrl-C, Serve's stop bounded, quiet logs off a terminal (fakes for Ray and Serve) ----------
class FakeRay:
    """What serve_fleet calls of `ray`, recorded: no cluster."""

    def __init__(self, calls: list) -> None:
        self.calls, self.up = calls, False

    def is_initialized(self) -> bool:
        return self.up

    def init(self, **kwargs) -> None:
        self.up = True
        self.calls.append("ray.init")

    def shutdown(self) -> None:
        self.up = False
        self.calls.append("ray.shutdown")


def fake_serve(calls: list) -> SimpleNamespace:
    """What serve_fleet calls of `serve`: the graceful stop never ends (Serve's, held by open websockets)."""

    async def shutdown_async() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            calls.append("serve stop cut short")
            raise

    return SimpleNamespace(
        start=lambda **kwargs: calls.append("serve.start"),
        run=lambda app, **kwargs: calls.append(("serve.run", kwargs["logging_config"])),
        shutdown_async=shutdown_async,
        shutdown=lambda: pytest.fail("serve.shutdown waits 30 s for its controller"),
        delete=lambda name, _blocking=True: calls.append(("serve.delete", name, _blocking)),
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_stops_the_fleet_as_ctrl_c_does_with_serves_stop_bounded(monkeypatch, sig):
    """Issue 42: on SIGTERM `vlash serve --ray` took 45 s ("Controller failed to shut down within 30.0s"). Either
    signal gives Serve's graceful stop SERVE_STOP_S, then shuts the Ray started here down; a stderr that is no
    terminal (pytest's) gets no colour codes and no access line per request."""
    calls: list = []
    monkeypatch.setattr(fleet_app_module, "ray", FakeRay(calls))
    monkeypatch.setattr(fleet_app_module, "serve", fake_serve(calls))
    monkeypatch.setattr(fleet_app_module, "SERVE_STOP_S", 0.05, raising=False)
    monkeypatch.delenv("RAY_COLOR_PREFIX", raising=False)
    before = signal.getsignal(sig)
    config = FleetConfig(policy="pi05-tiny", random_weights=True)
    ready = fleet_app_module.serve_fleet(config, "127.0.0.1", 8000, on_ready=lambda url, c: os.kill(os.getpid(), sig))
    assert ready and signal.getsignal(sig) is before
    run = ("serve.run", {"enable_access_log": False})
    assert calls == ["ray.init", "serve.start", run, "serve stop cut short", "ray.shutdown"]
    assert os.environ["RAY_COLOR_PREFIX"] == "0"


def test_a_fleet_on_a_cluster_is_deleted_without_waiting_and_a_terminal_keeps_rays_logs(monkeypatch):
    calls: list = []
    monkeypatch.setattr(fleet_app_module, "ray", FakeRay(calls))
    monkeypatch.setattr(fleet_app_module, "serve", fake_serve(calls))
    config = FleetConfig(policy="pi05-tiny", random_weights=True)
    on_ready = lambda url, c: os.kill(os.getpid(), signal.SIGTERM)  # noqa: E731
    assert fleet_app_module.serve_fleet(config, "127.0.0.1", 8000, "ray://head:10001", on_ready)
    assert calls[-1] == ("serve.delete", APP_NAME, False) and "ray.shutdown" not in calls  # the cluster lives on
    assert fleet_app_module.log_settings(SimpleNamespace(isatty=lambda: True)) is None


def test_a_websocket_whose_proxy_died_ends_in_one_line_not_a_traceback(caplog):
    """Stopping the fleet kills Serve's proxy under open websockets: the ingress logged each with a full traceback at
    ERROR (ActorDiedError from `ws.receive`). Now one INFO line each."""
    import logging

    from ray.exceptions import ActorDiedError

    class DeadProxySocket:
        client = SimpleNamespace(host="127.0.0.1", port=5)

        async def accept(self):
            pass

        async def send_bytes(self, data):
            pass

        async def receive(self):
            raise ActorDiedError()

    async def metadata():
        from tests.server.fake_runtime import METADATA

        return METADATA

    ingress = SimpleNamespace(map_name="auto", _policy_metadata=metadata)
    serve_log = logging.getLogger("ray.serve")  # Ray's: it does not propagate to the root logger caplog listens on
    serve_log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="ray.serve"):
            asyncio.run(OpenpiIngress.func_or_class.openpi(ingress, DeadProxySocket()))
    finally:
        serve_log.removeHandler(caplog.handler)
    assert [(r.levelno, r.exc_info) for r in caplog.records] == [(logging.INFO, None)], caplog.text
    assert "openpi connection 127.0.0.1:5 ended: ActorDiedError" in caplog.text


# --- a fleet on a local Ray cluster -------------------------------------------------------------------------------
@contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """A hard bound on a block that makes blocking Ray calls (SIGALRM raises in the main thread)."""

    def expire(*_):
        raise TimeoutError(f"{what}: over {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def _ray_turn(one_ray_at_a_time):  # tests/conftest.py: this module starts Ray
    yield


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory) -> Path:
    return write_policy(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def fleet(policy_dir) -> Iterator[str]:
    """Two model replicas (no CPU reserved: a 2-core machine) behind one ingress; yields the ws:// URL. A batch waits
    BATCH_WAIT_MS for more requests (three robots never fill one), so a robot's request spends most of its time at
    a replica: a replica killed while it reports requests ongoing has them in flight."""
    config = FleetConfig(
        checkpoint=str(policy_dir),
        steps=STEPS,
        num_replicas=2,
        num_cpus=0,
        ingress_num_cpus=0,
        warm_up_runs=1,
        batch_wait_ms=BATCH_WAIT_MS,
    )
    port = _free_port()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}  # ray.init replaces SIGTERM's
    try:
        with deadline(START_S, "starting the fleet"):
            allow_slow_proxy_start()  # as vlash serve does: a loaded CI machine's proxy needs more than 5 s
            ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            serve.run(fleet_app(config), name=APP_NAME, route_prefix="/")  # returns once every replica runs
        yield f"ws://127.0.0.1:{port}"
    finally:
        with deadline(WAIT_S, "stopping the fleet"):
            serve.shutdown()
            ray.shutdown()
        for sig, handler in handlers.items():  # pytest's own, so that SIGTERM and Ctrl-C stop the suite again
            signal.signal(sig, handler)


class Robot(threading.Thread):
    """An openpi robot script: one observation, one chunk, again, until stopped; any error ends it."""

    def __init__(self, url: str, seed: int) -> None:
        super().__init__(name=f"robot-{seed}", daemon=True)
        self.url, self.seed = url, seed
        self.chunks: list[float] = []  # monotonic receive time of each chunk
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            client = OpenpiTestClient(self.url)
            try:
                meta = client.metadata
                size = meta["cameras"][0]["height"]
                image = np.random.default_rng(self.seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
                observation = {"images": {"base_0_rgb": image}, "state": np.zeros(2, np.float32), "prompt": PROMPT}
                while not self.stop.is_set():
                    actions = client.infer(observation)["actions"]
                    assert actions.shape == (meta["chunk_length"], meta["action_dim"]) and np.isfinite(actions).all()
                    self.chunks.append(time.monotonic())
            finally:
                client.close()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.error = exc

    def chunks_since(self, t: float) -> int:
        return sum(1 for c in list(self.chunks) if c > t)


def _wait(condition, what: str, timeout_s: float = WAIT_S, robots: list[Robot] | None = None) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        failed = [(r.name, r.error) for r in robots or [] if r.error is not None]
        assert not failed, f"robots failed while waiting for {what}: {failed}"
        assert time.monotonic() < end, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.05)


def _replicas() -> list[str]:
    """Names of the model replica actors alive now."""
    return sorted(
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "serve" and "ModelReplica" in a["name"]
    )


def _busy_replica(names: list[str]) -> tuple[str, ray.actor.ActorHandle]:
    """(name, actor handle) of one of the model replicas `names` with requests ongoing now (Serve's own count, the one
    its router asks)."""
    while True:
        for name in names:
            replica = ray.get_actor(name, namespace="serve")
            if ray.get(replica.get_num_ongoing_requests.remote(), timeout=WAIT_S) > 0:
                return name, replica
        time.sleep(0.01)


def _ingress_retries() -> int:
    ingress = serve.get_deployment_handle("OpenpiIngress", app_name=APP_NAME)
    with deadline(WAIT_S, "reading the ingress's counters"):
        return ingress.counters.remote().result()["retries"]


def _running_replicas() -> int:
    deployment = serve.status().applications[APP_NAME].deployments["ModelReplica"]
    return deployment.replica_states.get("RUNNING", 0)


def _kill_a_busy_replica(robots: list[Robot]) -> None:
    """Kill a model replica with requests ongoing; return once every robot got MORE_CHUNKS chunks after the kill and
    Serve runs a replacement."""
    before = _replicas()
    assert len(before) == 2, before
    with deadline(WAIT_S, "a replica with requests ongoing"):
        killed, replica = _busy_replica(before)
    killed_at = time.monotonic()
    ray.kill(replica, no_restart=True)
    _wait(lambda: all(r.chunks_since(killed_at) >= MORE_CHUNKS for r in robots), "chunks after the kill", robots=robots)
    _wait(lambda: killed not in _replicas() and len(_replicas()) == 2, "a replacement replica", robots=robots)
    _wait(lambda: _running_replicas() == 2, "two running replicas", robots=robots)


@pytest.mark.slow
def test_the_fleet_serves_openpi_robots_and_survives_a_dead_replica(fleet, policy_dir):
    port = int(fleet.rsplit(":", 1)[1])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=WAIT_S) as health:
        assert health.status == 200 and health.read() == b"OK\n"
    # the chunk the fleet serves is the runtime's, seed for seed
    client = OpenpiTestClient(fleet)
    size = client.metadata["cameras"][0]["height"]
    image = np.random.default_rng(0).integers(0, 256, (size, size, 3), dtype=np.uint8)
    observation = {"images": {"base_0_rgb": image}, "state": np.array([0.5, 1.0], np.float32), "prompt": PROMPT}
    served = client.infer({**observation, "seed": 11})["actions"]
    client.close()
    request = make_infer(images={"base_0_rgb": image}, state=observation["state"], prompt=PROMPT, seed=11)
    np.testing.assert_allclose(served, make_runtime(policy_dir).run(request).actions, rtol=0, atol=1e-5)
    # a bad observation is that robot's error reply (text frame, close 1011), and no one else's
    bad = OpenpiTestClient(fleet)
    message, code = bad.error(b"\xc1")
    assert "not a msgpack frame" in message and code == 1011
    bad.close()

    robots = [Robot(fleet, seed) for seed in range(ROBOTS)]
    for robot in robots:
        robot.start()
    try:
        _wait(lambda: all(len(r.chunks) >= 2 for r in robots), "chunks before the kill", robots=robots)
        # A replica that reports requests ongoing can finish them before the kill lands (a loaded machine's lookup
        # and kill take a good part of a request's BATCH_WAIT_MS), so a kill that met no request in flight (the
        # ingress retried nothing) is repeated on the replacement fleet, KILLS times at most.
        for _ in range(KILLS):
            _kill_a_busy_replica(robots)
            if _ingress_retries() >= 1:
                break
    finally:
        for robot in robots:
            robot.stop.set()
        for robot in robots:
            robot.join(WAIT_S)
    assert not [r.name for r in robots if r.is_alive()], "a robot did not stop"
    assert [(r.name, r.error) for r in robots if r.error is not None] == []
    # a kill hit requests in flight: the ingress called again, on the live replica, and their robots were served
    assert _ingress_retries() >= 1, f"none of {KILLS} kills of a replica with requests ongoing met one in flight"
