"""The CPU floor's inputs: this host's GEMM rate and copy bandwidth, measured once per (CPU, threads, torch) and
cached; a profile with them in place of its assumed figures."""

from __future__ import annotations

import json
import math

import pytest

from vlash.devices import load_profile, model_floors
from vlash.devices.host_rates import (
    CACHE_FILE,
    HostRates,
    cached_host_rates,
    measure_copy_gbs,
    measure_gemm_gflops,
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
    for rate in (measure_gemm_gflops(size=256, repeats=2), measure_copy_gbs(mib=8, repeats=2)):
        assert math.isfinite(rate) and rate > 0


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
