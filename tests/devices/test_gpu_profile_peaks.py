"""The GPU profiles' roofline figures are the vendors' published dense peaks, and the floor of a known work is
work / peak on each (the same roofline code the CPU floor runs through, issue 46 §3).

Published figures (sparsity halved where the source quotes it with sparsity; each yaml names its source):
- H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet: 3.35 TB/s, FP32 67 TFLOPS, BF16/FP16 1979 and FP8 / INT8 3958
  with sparsity.
- H200 SXM: NVIDIA H200 Tensor Core GPU datasheet: 4.8 TB/s, the H100 SXM's compute figures.
- Jetson AGX Orin 64GB: Jetson AGX Orin series technical brief: 204.8 GB/s, GPU 170 sparse INT8 TOPS, 5.3 FP32
  TFLOPS.
- Jetson AGX Thor (T5000): Jetson Thor datasheet: 273 GB/s, 2070 FP4 TFLOPS with sparsity (the lower precisions are
  derived from it by Blackwell's 2x per halving of the width, and are marked as estimates in its yaml).
- RTX 4090: NVIDIA Ada GPU Architecture whitepaper v2.1: 1008 GB/s, FP32 82.6, FP16 / BF16 tensor 165.2 dense with
  FP32 accumulate, FP8 330.3, INT8 660.6.
- RTX 5090: NVIDIA RTX Blackwell GPU Architecture whitepaper: 1792 GB/s, FP32 104.8, FP16 / BF16 tensor 209.5 dense
  with FP32 accumulate, FP8 419, INT8 838, FP4 1676 (3352 sparse).
"""

from __future__ import annotations

import pytest

from vlash.devices import Work, available_profiles, load_profile, model_floors, prefill_work
from vlash.devices.roofline import denoise_work, floor
from vlash.policies.pi05 import load_preset

SPARSE = 2.0  # a "with sparsity" figure is twice the dense one
PUBLISHED = {  # profile -> (GB/s, {precision: dense TFLOPS (TOPS for int8)})
    "h100": (3350, {"fp32": 67.0, "bf16": 1979 / SPARSE, "fp16": 1979 / SPARSE, "fp8": 3958 / SPARSE,
                    "int8": 3958 / SPARSE}),
    "h200": (4800, {"fp32": 67.0, "bf16": 1979 / SPARSE, "fp16": 1979 / SPARSE, "fp8": 3958 / SPARSE,
                    "int8": 3958 / SPARSE}),
    "jetson-orin": (204.8, {"fp32": 5.3, "int8": 170 / SPARSE, "fp16": 170 / SPARSE / 2, "bf16": 170 / SPARSE / 2}),
    "jetson-thor": (273, {"nvfp4": 2070 / SPARSE, "fp8": 2070 / SPARSE / 2, "int8": 2070 / SPARSE / 2,
                          "fp16": 2070 / SPARSE / 4, "bf16": 2070 / SPARSE / 4}),
    "rtx-4090": (1008, {"fp32": 82.6, "fp16": 165.2, "bf16": 165.2, "fp8": 330.3, "int8": 660.6}),
    "rtx-5090": (1792, {"fp32": 104.8, "fp16": 209.5, "bf16": 209.5, "fp8": 419.0, "int8": 838.0,
                        "nvfp4": 3352 / SPARSE}),
}  # fmt: skip
REL = 2e-3  # the yamls round to 0.1 TFLOPS


def test_every_gpu_profile_has_published_figures():
    gpus = {name for name in available_profiles() if load_profile(name).device == "cuda"}
    assert gpus == set(PUBLISHED), "a new GPU profile needs its published peaks here"


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_profile_lists_the_published_dense_peaks(name):
    bandwidth, peaks = PUBLISHED[name]
    profile = load_profile(name)
    assert profile.memory_bandwidth_gbs == pytest.approx(bandwidth, rel=REL)
    assert set(profile.peak_tflops) == set(peaks), "every listed precision is a published (or derived) figure"
    for precision, tflops in peaks.items():
        assert profile.peak_tflops[precision] == pytest.approx(tflops, rel=REL), precision


def test_the_h200_computes_like_the_h100_and_differs_in_bandwidth_only():
    h100, h200 = load_profile("h100"), load_profile("h200")
    assert h100.peak_tflops == h200.peak_tflops and h200.memory_bandwidth_gbs > h100.memory_bandwidth_gbs


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_floor_of_a_known_work_is_work_over_the_peak(name):
    profile = load_profile(name)
    work = Work(flops=1e12, weight_bytes=4e9, kv_bytes=1e9)
    for precision, tflops in profile.peak_tflops.items():
        got = floor(work, profile, precision)
        assert got.compute_s == pytest.approx(1e12 / (tflops * 1e12))
        assert got.memory_s == pytest.approx(5e9 / (profile.memory_bandwidth_gbs * 1e9))
        assert got.seconds == max(got.compute_s, got.memory_s)


def test_full_pi05_on_an_h100_in_bf16_takes_the_989_tflops_peak():
    config, h100 = load_preset("pi05"), load_profile("h100")
    floors = model_floors(config, h100, "bfloat16")
    prefill, step = prefill_work(config, "bf16"), denoise_work(config, "bf16")
    assert floors["prefill"].compute_s == pytest.approx(prefill.flops / 989.4e12, rel=REL)
    assert floors["step"].memory_s == pytest.approx(step.bytes / 3.35e12, rel=REL)
    want = max(prefill.flops / 989.4e12, prefill.bytes / 3.35e12)
    assert floors["prefill"].seconds == pytest.approx(want, rel=REL)
