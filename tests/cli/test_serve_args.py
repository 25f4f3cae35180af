"""`vlash serve`'s arguments: --policy resolved like every command's (a directory works, --checkpoint is its
synonym), the CPU thread default that leaves the robot a core, --insecure (ZeroMQ and openpi) and --allow-failed-gate
passed through."""

from __future__ import annotations

import os
import signal

import pytest

import vlash.cli.cpu_threads as cpu_threads
import vlash.cli.serve_cmd as serve_cmd
import vlash.cli.serve_run as serve_run
from robot_io.client import PolicyClient
from tests.serve_process import ServeProcess
from tests.server.conftest import MICRO, write_policy
from vlash.cli.main import parse_args
from vlash.errors import ConfigError
from vlash.policies.names.source import PolicyKind


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return write_policy(tmp_path_factory.mktemp("serve"))


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (16, 15)])
def test_server_threads_leave_the_robot_a_core(cores, threads):
    assert cpu_threads.server_threads(cores=cores) == threads
    assert cpu_threads.server_threads(3, cores=cores) == 3  # asked for: as asked


def test_serve_defaults_to_all_cores_but_one(monkeypatch):
    """torch's default, every core, starved a robot process on a 2-core box (0 chunks, 300/300 holds)."""
    monkeypatch.setattr(cpu_threads, "available_cores", lambda: 2)
    assert serve_run.plan(parse_args(["serve", "--policy", str(MICRO), "--random-weights"])).threads == 1
    assert (
        serve_run.plan(parse_args(["serve", "--policy", str(MICRO), "--random-weights", "--threads", "2"])).threads == 2
    )


def test_serve_asks_idle_openmp_threads_to_sleep_unless_told(monkeypatch):
    """Spinning workers beside one busy core: a 2-thread chunk 3.5x slower, 1.6-1.8x with PASSIVE (BENCHMARKS.md)."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    parse_args(["keys", "--out", "x"])
    assert "OMP_WAIT_POLICY" not in os.environ  # other commands leave it alone
    parse_args(["serve", "--policy", str(MICRO), "--random-weights"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    parse_args(["serve", "--policy", str(MICRO), "--random-weights"])
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # the user's choice stands


class Recorder:
    def __init__(self) -> None:
        self.args, self.kwargs = (), {}

    def __call__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        return "loaded"


@pytest.mark.parametrize("flag", ["--policy", "--checkpoint"])
def test_a_directory_is_served_from_its_path(policy_dir, monkeypatch, flag):
    loader = Recorder()
    monkeypatch.setattr(serve_run, "load_runtime", loader)
    args = parse_args(["serve", flag, str(policy_dir), "--allow-failed-gate"])
    plan = serve_run.plan(args)
    assert plan.source.kind is PolicyKind.DIRECTORY and plan.engine == "torch"
    assert serve_run.load(plan, args) == "loaded"
    policy, checkpoint, random_weights = loader.args[:3]
    assert (policy, checkpoint, random_weights) == (None, policy_dir, False)
    assert loader.kwargs == {
        "allow_failed_gate": True,
        "threads": plan.threads,
        "compile_mode": None,
        "graphs": None,
        "random_dims": {},
        "guidance_weight": 5.0,
    }


def test_a_preset_is_served_with_random_weights(monkeypatch):
    loader = Recorder()
    monkeypatch.setattr(serve_run, "load_runtime", loader)
    args = parse_args(["serve", "--policy", str(MICRO), "--random-weights"])
    plan = serve_run.plan(args)
    serve_run.load(plan, args)
    assert loader.args[:3] == (str(MICRO), None, True)
    assert loader.kwargs == {
        "allow_failed_gate": False,
        "threads": plan.threads,
        "compile_mode": None,
        "graphs": None,
        "random_dims": {},
        "guidance_weight": 5.0,
    }


def test_the_rtc_guidance_weight_reaches_the_runtime_and_a_bad_one_is_refused_naming_the_flag():
    args = parse_args(["serve", "--policy", str(MICRO), "--random-weights", "--guidance-weight", "0.5"])
    loaded = serve_run.load(serve_run.plan(args), args)
    assert loaded.runtime.guidance_weight == 0.5
    with pytest.raises(ConfigError, match=r"--guidance-weight must be in \(0, 1000\]"):
        serve_run.plan(parse_args(["serve", "--policy", str(MICRO), "--random-weights", "--guidance-weight", "0"]))


def test_cuda_graphs_are_chosen_on_a_gpu_and_refused_on_a_cpu(monkeypatch):
    """--cuda-graphs (chunk unless told step) and --compile reach the torch engine; a GPU profile's graphs are the
    default; on a CPU the flag is refused in one line before anything loads. The plans below are a GPU machine's
    (torch is told it sees one: nothing runs on it); vlash.devices.cuda_check refuses a GPU profile elsewhere."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    base = ["serve", "--policy", str(MICRO), "--random-weights"]
    with pytest.raises(ConfigError, match="--cuda-graphs needs a CUDA device"):
        serve_run.plan(parse_args([*base, "--device", "cpu", "--cuda-graphs"]))
    options = serve_run.plan(parse_args([*base, "--device", "h100"])).engine_options  # profiles name no GPU index
    assert options == {"compile_mode": None, "graphs": "chunk"}
    options = serve_run.plan(parse_args([*base, "--device", "h100", "--cuda-graphs", "step", "--compile", "default"]))
    assert options.engine_options == {"compile_mode": "default", "graphs": "step"}
    reduce_overhead = serve_run.plan(parse_args([*base, "--device", "h100", "--compile", "reduce-overhead"]))
    assert reduce_overhead.engine_options["graphs"] is None  # its own graphs replace the profile's
    assert serve_run.plan(parse_args([*base, "--device", "cpu"])).engine_options["graphs"] is None


def test_a_reachable_bind_needs_keys_or_insecure():
    args = ["serve", "--policy", str(MICRO), "--random-weights", "--bind", "tcp://0.0.0.0:0"]
    with pytest.raises(ConfigError, match="--insecure"):
        serve_run.plan(parse_args(args))
    assert serve_run.plan(parse_args([*args, "--insecure"])).config.insecure


def test_the_openpi_endpoint_needs_insecure_where_it_is_reachable_or_beside_curve_keys(tmp_path):
    """The openpi websocket has no authentication: refused in one line before the model loads where a reachable
    ZeroMQ bind would be, and wherever ZeroMQ clients must authenticate (it would let anyone past the allow-list)."""
    base = ["serve", "--policy", str(MICRO), "--random-weights", "--openpi-port", "0"]
    keys = ["--curve-keys", str(tmp_path), "--allow-dir", str(tmp_path)]
    for flags, why in (
        (["--openpi-host", "0.0.0.0"], "reachable from other machines"),
        (keys, "no authentication while --curve-keys/--allow-dir require it"),
    ):
        with pytest.raises(ConfigError, match=why) as refused:
            serve_run.plan(parse_args([*base, *flags]))
        assert "--insecure" in str(refused.value) and "\n" not in str(refused.value)
        assert serve_run.plan(parse_args([*base, *flags, "--insecure"])).openpi is not None
    assert serve_run.plan(parse_args(base)).openpi.is_local  # loopback, no keys: served as before


def test_serve_policy_directory_end_to_end(policy_dir):
    """`vlash serve --policy ./some_dir` serves it; the startup line says how many threads it took."""
    server = ServeProcess(["--policy", str(policy_dir), "--steps", "2"])
    try:
        startup = next(line for line in server.out if "serving on" in line)
        assert "threads=1" in startup, startup  # ServeProcess passes --threads 1
        with PolicyClient(server.endpoint, timeout_s=10.0) as client:
            assert client.connect().num_steps == 2
    finally:
        assert server.stop() == 0, server.err


def test_a_server_that_fails_while_serving_exits_1(monkeypatch, capsys):
    """A serving thread that dies stops the server (vlash.server.server): serve must then exit non-zero so a
    supervisor restarts it, instead of idling with a dead server."""
    import threading

    import vlash.runtime.loading as loading

    class DyingServer:  # the PolicyServer interface serve_cmd.run uses; its model thread dies after start
        def __init__(self, runtime, metadata, config, on_failure):
            self.on_failure, self.failure, self.warm_up_s, self.jobs = on_failure, None, 0.0, []
            self.stats = type("Stats", (), {"line": lambda self, pending=0: "served 0"})()

        def start(self):
            def die():
                self.failure = RuntimeError("model thread died")
                self.on_failure(self.failure)

            threading.Timer(0.05, die).start()
            return "tcp://127.0.0.1:1"

        def stop(self):
            pass

    monkeypatch.setattr(serve_run, "PolicyServer", DyingServer)
    monkeypatch.setattr(serve_run, "load", lambda plan, args: loading.load_runtime(str(MICRO), random_weights=True))
    args = parse_args(["serve", "--policy", str(MICRO), "--random-weights", "--stats-every", "0", "--no-warmup"])
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    assert serve_cmd.run(args) == 1
    assert "the server stopped: RuntimeError('model thread died')" in capsys.readouterr().err
    # serving installs its SIGINT / SIGTERM handlers; run in-process, it must give pytest's back, or the suite ignores
    # Ctrl-C and SIGTERM from then on (as it did)
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_pi05_without_its_weights_is_three_short_lines(capsys):
    """`vlash serve --policy pi05 --device jetson` (offline: tests/conftest.py sets HF_HUB_OFFLINE; the hub cache is
    empty) says what pi05 is, how to get its weights and what to run then, instead of one 430-character line."""
    from vlash.cli.main import main

    assert main(["serve", "--policy", "pi05", "--device", "jetson"]) == 2
    lines = capsys.readouterr().err.rstrip("\n").split("\n")
    assert len(lines) == 3 and all(len(line) <= 150 for line in lines), lines
    what, get, then = lines
    assert what.startswith("vlash serve: error: --policy pi05 names a model's shapes") and "lerobot/pi05_base" in what
    assert "HF_HUB_OFFLINE is set" in get and "`hf download lerobot/pi05_base`" in get, get
    assert then.strip().startswith("then run: vlash serve --policy pi05 --device jetson") and "--random-weights" in then
