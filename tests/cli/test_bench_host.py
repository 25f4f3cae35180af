"""`vlash bench` on a CPU: the flags the user gave choose the engine, and the floor comes from this host's measured
rates (or the profile's with --profile-rates)."""

from __future__ import annotations

import json

import pytest

import robot_io.host_load as host_load
import vlash.bench as bench
import vlash.cli.cpu_threads as cpu_threads
import vlash.devices.host_rates as host_rates
from vlash.bench import BenchSettings, roofline_ms
from vlash.cli.main import main
from vlash.devices import load_profile
from vlash.devices.host_rates import HostRates, with_host_rates
from vlash.errors import ConfigError
from vlash.policies.pi05 import load_preset

RATES = HostRates(120.0, 9.0, 1, "test cpu", "test torch", "2026-01-01T00:00:00+00:00")


@pytest.fixture(autouse=True)
def torch_threads():
    """`vlash bench` sets torch's threads in this process: put them back for the tests that follow."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def host(monkeypatch):
    monkeypatch.setattr(host_rates, "cached_host_rates", lambda threads, remeasure=False: (RATES, "cache.json"))


@pytest.mark.parametrize(
    ("flags", "engine"),
    [([], "onnxruntime"), (["--compile", "default"], "torch"), (["--engine", "torch"], "torch")],
)
def test_compile_without_an_engine_means_torch_and_the_profile_sets_the_rest(monkeypatch, capsys, host, flags, engine):
    built = {}

    def capture(config, engine_name, dtype, device, **kwargs):
        built.update(engine=engine_name, compile=kwargs.get("compile_mode"))  # none for other engines
        raise ConfigError("stop here")

    monkeypatch.setattr(bench, "make_engine", capture)
    assert main(["bench", "--policy", "pi05-tiny", "--device", "cpu", *flags]) == 2
    assert built["engine"] == engine and built["compile"] == ("default" if "--compile" in flags else None)
    assert "floor from this host: 120 GFLOP/s fp32 GEMM, 9.0 GB/s copy" in capsys.readouterr().out


def test_the_cpu_floor_uses_the_host_rates_unless_the_profile_rates_are_asked_for(capsys, host):
    args = ["bench", "--policy", "pi05-tiny", "--device", "cpu", "--engine", "torch", "--steps", "2", "--iters", "1"]
    args += ["--warmup", "0", "--json"]
    settings = BenchSettings(schedule="constant", steps=2, iters=1, warmup=0, batch=1)
    config, cpu = load_preset("pi05-tiny"), load_profile("cpu")
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["host_rates"]["gemm_gflops"] == 120.0 and report["profile"] == "cpu (measured host)"
    want = roofline_ms(config, with_host_rates(cpu, RATES), "fp32", settings)
    assert report["summary"]["chunk_ms"]["floor"] == pytest.approx(want["chunk_ms"])
    assert main([*args, "--profile-rates"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["host_rates"] == {} and report["profile"] == "cpu"
    assert report["summary"]["chunk_ms"]["floor"] == pytest.approx(
        roofline_ms(config, cpu, "fp32", settings)["chunk_ms"]
    )


def test_without_threads_bench_keeps_a_core_free_and_prints_the_host_load_beside_the_timings(capsys, host, monkeypatch):
    """All cores but one (vlash serve's rule), not torch's every core; the load average, the cores and the threads
    beside the table, and in the JSON; a warning line when the load exceeds the cores left free."""
    monkeypatch.setattr(cpu_threads, "available_cores", lambda: 3)  # 2 threads on this fake 3-core host
    monkeypatch.setattr(host_load, "load_average", lambda: 7.25)  # far more than the 1 core left
    args = ["bench", "--policy", "pi05-tiny", "--device", "cpu", "--engine", "torch", "--steps", "2", "--iters", "1",
            "--warmup", "0"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "threads=2 " in out
    lines = [" ".join(line.split()) for line in out.splitlines()]
    host_line = f"host load 7.25 (1-min average) on {host_load.available_cores()} cores; torch threads: 2"
    assert host_line in lines
    assert any(line.startswith("warning: the host's load average 7.25 exceeds") for line in lines)
    assert main([*args, "--json", "--threads", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["engine"]["threads"] == 1 and report["host"]["threads"] == 1 and report["host"]["load_1m"] == 7.25
