"""Device profiles (configs/devices/*.yaml): which engine and precision to run, and the hardware's memory
bandwidth and peak throughput that the roofline floor of `vlash bench` is computed from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from vlash.dataclass_io import dataclass_from_mapping
from vlash.devices.jetson import detect_jetson
from vlash.errors import ConfigError
from vlash.resources import config_dir

# configs/ sits at the repository root next to the package (editable install / source checkout).
PROFILE_DIR = config_dir("devices")
ENGINES = ("torch", "onnxruntime", "tensorrt")
DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4", "nvfp4")
CUDA_GRAPHS = ("off", "chunk", "step")  # the torch engine's static programs (vlash.engines.static_program)


@dataclass(frozen=True)
class DeviceProfile:
    name: str  # profile name (file stem)
    device: str  # "cpu" or "cuda": where tensors live
    engine: str  # default engine: torch, onnxruntime or tensorrt
    precision: str  # default precision of weights/activations
    memory_bandwidth_gbs: float  # peak DRAM bandwidth, GB/s (vendor figure; roofline)
    peak_tflops: dict[str, float]  # precision -> dense peak TFLOPS (TOPS for int8); roofline
    threads: int = 0  # CPU threads for the engine (0 = library default)
    # torch engine: "chunk" captures the prefill and the denoise steps between two streamed pieces as CUDA graphs,
    # "step" one graph per denoise step, "off" runs eagerly
    cuda_graphs: str = "off"
    ort_providers: tuple[str, ...] = ("CPUExecutionProvider",)  # ONNX Runtime providers, preferred first
    description: str = ""  # free text

    def __post_init__(self) -> None:
        where = f"device profile {self.name!r}"
        if self.device not in DEVICES:
            raise ConfigError(f"{where}: device must be one of {DEVICES}, got {self.device!r}")
        if self.engine not in ENGINES:
            raise ConfigError(f"{where}: engine must be one of {ENGINES}, got {self.engine!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"{where}: precision must be one of {PRECISIONS}, got {self.precision!r}")
        if not self.memory_bandwidth_gbs > 0:
            raise ConfigError(f"{where}: memory_bandwidth_gbs must be > 0, got {self.memory_bandwidth_gbs!r}")
        if not isinstance(self.peak_tflops, dict) or not self.peak_tflops:
            raise ConfigError(f"{where}: peak_tflops must map precisions to TFLOPS, got {self.peak_tflops!r}")
        for precision, value in self.peak_tflops.items():
            if precision not in PRECISIONS or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{where}: peak_tflops[{precision!r}] = {value!r} (need a known precision, > 0)")
        if self.precision not in self.peak_tflops:
            raise ConfigError(f"{where}: no peak_tflops entry for its precision {self.precision!r}")
        if self.threads < 0:
            raise ConfigError(f"{where}: threads must be >= 0, got {self.threads}")
        if self.cuda_graphs not in CUDA_GRAPHS:
            raise ConfigError(f"{where}: cuda_graphs must be one of {CUDA_GRAPHS}, got {self.cuda_graphs!r}")
        if self.cuda_graphs != "off" and self.device != "cuda":
            raise ConfigError(f"{where}: cuda_graphs needs device: cuda, got device {self.device!r}")
        object.__setattr__(self, "ort_providers", tuple(self.ort_providers))

    def peak_flops(self, precision: str) -> float:
        """FLOP/s at `precision` (falls back to the profile's own precision's figure when not listed)."""
        return self.peak_tflops.get(precision, self.peak_tflops[self.precision]) * 1e12

    @property
    def graphs(self) -> str | None:
        """The torch engine's `graphs` option: "chunk", "step" or None (off)."""
        return None if self.cuda_graphs == "off" else self.cuda_graphs

    @property
    def bandwidth(self) -> float:
        """Bytes/s."""
        return self.memory_bandwidth_gbs * 1e9


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def profile_from_dict(doc: Any, source: str = "<dict>") -> DeviceProfile:
    return dataclass_from_mapping(DeviceProfile, doc, source, "device profile", ConfigError)


def load_profile(name_or_path: str | Path) -> DeviceProfile:
    """A profile by name (configs/devices/NAME.yaml), by YAML path, or "jetson" (detects Orin / Thor)."""
    if str(name_or_path) == "jetson":
        name_or_path = detect_jetson()
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILE_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ConfigError(
                f"unknown device profile {str(name_or_path)!r}; available: {', '.join(available_profiles())}, jetson"
            )
    elif not path.is_file():
        raise ConfigError(f"device profile file {path} does not exist")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})") from exc
    if isinstance(doc, dict):
        doc.setdefault("name", path.stem)
    return profile_from_dict(doc, source=str(path))


def is_profile_name(value: str) -> bool:
    """True for names that `load_profile` resolves (profile names, "jetson", *.yaml paths)."""
    return value == "jetson" or value in available_profiles() or value.endswith((".yaml", ".yml"))
