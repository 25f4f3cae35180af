"""Device profiles (validation, Jetson detection) and the roofline arithmetic."""

from __future__ import annotations

import pytest

from vlash.devices import (
    DeviceProfile,
    available_profiles,
    denoise_work,
    detect_jetson,
    load_profile,
    model_floors,
    prefill_work,
    profile_from_dict,
)
from vlash.devices import profile as profile_module
from vlash.errors import ConfigError
from vlash.policies.pi05 import load_preset
from vlash.policies.pi05.weights import build_random

VALID = {
    "name": "test",
    "device": "cuda",
    "engine": "torch",
    "precision": "bf16",
    "memory_bandwidth_gbs": 100.0,
    "peak_tflops": {"bf16": 10.0, "fp32": 1.0},
}


def test_every_shipped_profile_loads():
    names = available_profiles()
    assert {"cpu", "rtx-4090", "rtx-5090", "jetson-orin", "jetson-thor", "h100"} <= set(names)
    for name in names:
        profile = load_profile(name)
        assert profile.name == name and profile.bandwidth > 0 and profile.peak_flops(profile.precision) > 0
    assert load_profile("rtx-4090").memory_bandwidth_gbs == 1008


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"engine": "tensorflow"}, "engine must be one of"),
        ({"device": "tpu"}, "device must be one of"),
        ({"precision": "fp64"}, "precision must be one of"),
        ({"memory_bandwidth_gbs": 0}, "memory_bandwidth_gbs must be > 0"),
        ({"peak_tflops": {"fp32": 1.0}}, "no peak_tflops entry for its precision 'bf16'"),
        ({"peak_tflops": {"bf16": -1}}, r"peak_tflops\['bf16'\] = -1"),
        ({"threads": -2}, "threads must be >= 0"),
        ({"device": "cpu", "cuda_graphs": "chunk"}, "cuda_graphs needs device: cuda"),
        ({"cuda_graphs": True}, "cuda_graphs must be one of"),
        ({"bandwidth": 5}, r"unknown device profile keys \['bandwidth'\]"),
    ],
)
def test_invalid_profiles_name_the_problem(change, match):
    with pytest.raises(ConfigError, match=match):
        profile_from_dict({**VALID, **change}, source="test.yaml")


def test_missing_fields_bad_yaml_and_unknown_names(tmp_path):
    with pytest.raises(ConfigError, match=r"missing \['memory_bandwidth_gbs'\]"):
        profile_from_dict({k: v for k, v in VALID.items() if k != "memory_bandwidth_gbs"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_profile(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_profile(tmp_path / "none.yaml")
    with pytest.raises(ConfigError, match="unknown device profile 'rtx-9999'; available: cpu"):
        load_profile("rtx-9999")
    path = tmp_path / "mine.yaml"
    path.write_text("device: cpu\nengine: torch\nprecision: fp32\nmemory_bandwidth_gbs: 10\npeak_tflops: {fp32: 1}\n")
    assert load_profile(path).name == "mine"


@pytest.fixture
def tegra(tmp_path):
    release = tmp_path / "nv_tegra_release"
    release.write_text("# R36 (release), REVISION: 4.0\n")
    return release, tmp_path / "model"


def test_jetson_detection_from_the_device_tree_model(tegra):
    release, model = tegra
    model.write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\0")
    assert detect_jetson(release, model, gpu_name=lambda: "") == "jetson-orin"
    model.write_bytes(b"NVIDIA Jetson AGX Thor Developer Kit\0")
    assert detect_jetson(release, model, gpu_name=lambda: "") == "jetson-thor"


def test_jetson_detection_from_the_gpu_name_and_failures(tegra, tmp_path):
    release, model = tegra  # no device-tree model file
    assert detect_jetson(release, model, gpu_name=lambda: "NVIDIA Thor") == "jetson-thor"
    with pytest.raises(ConfigError, match="neither Orin nor Thor"):
        detect_jetson(release, model, gpu_name=lambda: "Xavier")
    with pytest.raises(ConfigError, match="not a Jetson"):
        detect_jetson(tmp_path / "absent", model, gpu_name=lambda: "NVIDIA Thor")


def test_device_jetson_loads_the_detected_profile(monkeypatch, tegra):
    import vlash.devices.jetson as jetson

    release, model = tegra
    model.write_bytes(b"Jetson AGX Orin\0")
    monkeypatch.setattr(jetson, "TEGRA_RELEASE", release)
    monkeypatch.setattr(jetson, "DEVICE_TREE_MODEL", model)
    monkeypatch.setattr(jetson.detect_jetson, "__defaults__", (release, model, lambda: ""))
    assert load_profile("jetson").name == "jetson-orin"
    monkeypatch.setattr(jetson.detect_jetson, "__defaults__", (release.parent / "absent", model, lambda: ""))
    with pytest.raises(ConfigError, match="not a Jetson"):
        load_profile("jetson")
    assert profile_module.is_profile_name("jetson")


def test_roofline_weight_bytes_match_the_model_parameters():
    config = load_preset("pi05-tiny")
    model = build_random(config)
    vlm = sum(p.numel() for n, p in model.vlm.named_parameters() if "embed" not in n)
    prefill_params = sum(p.numel() for p in model.vision.parameters()) + model.projector.weight.numel() + vlm
    step_params = sum(p.numel() for p in model.expert.parameters()) + sum(
        m.weight.numel() for m in (model.action_in_proj, model.action_out_proj, model.time_mlp_in, model.time_mlp_out)
    )
    prefill_counted = prefill_work(config, "fp32").weight_bytes / 4 - config.max_token_len * config.vlm.width
    assert prefill_counted == pytest.approx(prefill_params, rel=0.02)  # biases and norms are left out
    assert denoise_work(config, "fp32").weight_bytes / 4 == pytest.approx(step_params, rel=0.02)
    assert prefill_work(config, "bf16").weight_bytes * 2 == prefill_work(config, "fp32").weight_bytes


def test_roofline_is_the_max_of_memory_and_compute_time():
    config = load_preset("pi05-tiny")
    step = denoise_work(config, "bf16")
    kv = 2 * config.vlm.depth * config.vlm.num_kv_heads * config.prefix_len * config.vlm.head_dim * 2
    assert step.kv_bytes == kv
    slow_memory = DeviceProfile(**{**VALID, "memory_bandwidth_gbs": 1e-3, "peak_tflops": {"bf16": 1e3}})
    floors = model_floors(config, slow_memory, "bfloat16")  # torch dtype names are accepted
    assert floors["step"].bound == "memory"
    assert floors["step"].seconds == pytest.approx(step.bytes / 1e6)
    slow_compute = DeviceProfile(**{**VALID, "memory_bandwidth_gbs": 1e6, "peak_tflops": {"bf16": 1e-6}})
    floors = model_floors(config, slow_compute, "bf16", batch=2)
    assert floors["prefill"].bound == "compute"
    assert floors["prefill"].seconds == pytest.approx(2 * prefill_work(config, "bf16").flops / 1e6)
    with pytest.raises(ConfigError, match="unknown precision 'fp64'"):
        model_floors(config, slow_compute, "fp64")
