"""The CPU floor's inputs: this host's fastest GEMM kernel per precision and its copy bandwidth, measured once per
(CPU, threads, torch, onnxruntime) and cached; a profile with them in place of its assumed figures."""

from __future__ import annotations

import json
import math

import pytest
import torch

import vlash.devices.host_rates as host_rates
from vlash.devices import load_profile, model_floors
from vlash.devices.gemm_kernels import GemmRate, measure_gemm_rates
from vlash.devices.host_rates import (
    CACHE_FILE,
    HostRates,
    cached_host_rates,
    measure_copy_gbs,
    measure_host_rates,
    with_host_rates,
)
from vlash.policies.pi05 import load_preset


def _counting(calls: list[int]):
    def measure(threads: int) -> HostRates:
        calls.append(threads)
        return HostRates(100.0 + len(calls), 10.0, threads, "test cpu", "test torch", "2026-01-01T00:00:00+00:00")

    return measure


def test_rates_are_measured_once_per_thread_count_and_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("VLASH_CACHE_DIR", str(tmp_path))
    calls: list[int] = []
    first, path = cached_host_rates(2, measure=_counting(calls))
    again, _ = cached_host_rates(2, measure=_counting(calls))
    assert calls == [2] and again == first and path == tmp_path / CACHE_FILE
    other, _ = cached_host_rates(1, measure=_counting(calls))  # another thread count: its own entry
    assert calls == [2, 1] and other.threads == 1
    fresh, _ = cached_host_rates(2, remeasure=True, measure=_counting(calls))
    assert calls == [2, 1, 2] and fresh.gemm_gflops != first.gemm_gflops
    assert len(json.loads(path.read_text())) == 2


def test_a_damaged_cache_is_measured_again_and_rewritten(monkeypatch, tmp_path):
    monkeypatch.setenv("VLASH_CACHE_DIR", str(tmp_path))
    (tmp_path / CACHE_FILE).write_text("{not json")
    calls: list[int] = []
    cached_host_rates(2, measure=_counting(calls))
    assert calls == [2] and len(json.loads((tmp_path / CACHE_FILE).read_text())) == 1


def test_the_measurements_are_rates():
    kernels = measure_gemm_rates(1, sizes=(64, 128), budget_s=0.2)
    names = {(k.kernel, k.precision) for k in kernels}
    assert {("torch mm", "fp32"), ("oneDNN linear", "fp32"), ("onnxruntime MatMul", "fp32")} <= names
    assert ("onnxruntime MatMulInteger", "int8") in names  # onnxruntime is a dev dependency
    for k in kernels:
        assert k.size in (64, 128) and math.isfinite(k.gflops) and k.gflops >= k.median_gflops > 0, k
    copy = measure_copy_gbs(mib=8, repeats=2)
    assert math.isfinite(copy) and copy > 0


FP32_TORCH = GemmRate("torch mm", "fp32", 4096, 200.0, 190.0)
FP32_ORT = GemmRate("onnxruntime MatMul", "fp32", 512, 370.0, 360.0)
BF16_TORCH = GemmRate("torch mm", "bf16", 1024, 1500.0, 1400.0)
INT8_ORT = GemmRate("onnxruntime MatMulInteger", "int8", 512, 1700.0, 1650.0)


def _rates(*kernels: GemmRate) -> HostRates:
    fp32 = max(k.gflops for k in kernels if k.precision == "fp32")
    return HostRates(fp32, 20.0, 2, "test cpu", "test torch", "now", kernels, "test ort")


def test_each_precision_takes_the_fastest_kernel_at_it_or_wider():
    rates = _rates(FP32_TORCH, FP32_ORT, BF16_TORCH, INT8_ORT)
    assert rates.peak("fp32") == FP32_ORT  # onnxruntime's MatMul beats torch's: it sets the fp32 floor
    assert rates.peak("bfloat16") == BF16_TORCH and rates.peak("fp16") == BF16_TORCH  # same width
    assert rates.peak("int8") == INT8_ORT and rates.peak("int4") == INT8_ORT
    without_bf16 = _rates(FP32_TORCH, FP32_ORT)
    assert without_bf16.peak("bf16") == FP32_ORT  # a bf16 engine is no slower a bound than fp32 kernels
    assert rates.describe() == (
        "370 GFLOP/s fp32 GEMM (onnxruntime MatMul, 512^3), 1500 GFLOP/s bf16 GEMM (torch mm, 1024^3), "
        "1700 GFLOP/s int8 GEMM (onnxruntime MatMulInteger, 512^3)"
    )
    assert without_bf16.describe(("bf16",)) == "370 GFLOP/s bf16 GEMM (onnxruntime MatMul fp32, 512^3)"
    profile = with_host_rates(load_profile("cpu"), rates)
    assert profile.peak_flops("fp32") == pytest.approx(370e9) and profile.peak_flops("bf16") == pytest.approx(1500e9)
    assert profile.peak_flops("int8") == pytest.approx(1700e9)


def test_the_fp32_rate_is_the_fastest_fp32_kernel_and_the_kernels_survive_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("VLASH_CACHE_DIR", str(tmp_path))
    kernels = [FP32_TORCH, FP32_ORT, BF16_TORCH]

    def measure(threads: int) -> HostRates:
        return measure_host_rates(threads, copy_mib=8, measure_gemms=lambda t: kernels)

    first, path = cached_host_rates(3, measure=measure)
    assert first.gemm_gflops == 370.0 and first.kernels == tuple(kernels)
    again, _ = cached_host_rates(3, measure=lambda threads: pytest.fail("measured again"))
    assert again == first


def test_an_entry_without_the_kernels_is_not_reused(monkeypatch, tmp_path):
    """An entry written when the floor came from torch's fp32 GEMM alone has another key: measured again."""
    monkeypatch.setenv("VLASH_CACHE_DIR", str(tmp_path))
    old = {"gemm_gflops": 100.0, "memory_gbs": 9.0, "threads": 2, "cpu": host_rates.cpu_model(),
           "torch": torch.__version__, "measured_at": "2026-11-24T00:00:00+00:00"}  # fmt: skip
    (tmp_path / CACHE_FILE).write_text(json.dumps({f"{old['cpu']} | threads=2 | torch={old['torch']}": old}))
    calls: list[int] = []
    cached_host_rates(2, measure=_counting(calls))
    assert calls == [2]


def test_a_profile_with_host_rates_gives_floors_from_them():
    cpu = load_profile("cpu")
    rates = HostRates(cpu.peak_tflops["fp32"] * 1e3 / 2, cpu.memory_bandwidth_gbs / 4, 2, "cpu", "torch", "now")
    measured = with_host_rates(cpu, rates)
    assert measured.memory_bandwidth_gbs == rates.memory_gbs and measured.peak_flops("fp32") == pytest.approx(
        rates.gemm_gflops * 1e9
    )
    config = load_preset("pi05-small")
    before, after = model_floors(config, cpu, "fp32"), model_floors(config, measured, "fp32")
    for graph in ("prefill", "step"):  # half the FLOP rate, a quarter of the bandwidth
        assert after[graph].compute_s == pytest.approx(2 * before[graph].compute_s)
        assert after[graph].memory_s == pytest.approx(4 * before[graph].memory_s)
