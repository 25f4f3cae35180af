"""`--device jetson`: tell Jetson AGX Orin from Jetson Thor (L4T release file + model / GPU name)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vlash.errors import ConfigError

TEGRA_RELEASE = Path("/etc/nv_tegra_release")  # present on every L4T (Jetson Linux) install
DEVICE_TREE_MODEL = Path("/proc/device-tree/model")  # e.g. "NVIDIA Jetson AGX Orin Developer Kit"
FAMILIES = (("thor", "jetson-thor"), ("orin", "jetson-orin"))  # substring of the name -> profile


def _cuda_device_name() -> str:
    import torch  # extra: server

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""


def detect_jetson(
    release_file: Path = TEGRA_RELEASE,
    model_file: Path = DEVICE_TREE_MODEL,
    gpu_name: Callable[[], str] = _cuda_device_name,
) -> str:
    """The profile name for this Jetson ("jetson-orin" / "jetson-thor"); ConfigError anywhere else."""
    if not release_file.is_file():
        raise ConfigError(
            f"--device jetson: this is not a Jetson ({release_file} not found); "
            "name a profile instead (cpu, rtx-4090, rtx-5090, h100, jetson-orin, jetson-thor)"
        )
    names = []
    if model_file.is_file():
        names.append(model_file.read_bytes().rstrip(b"\0").decode(errors="replace"))
    names.append(gpu_name())
    for name in names:
        for key, profile in FAMILIES:
            if key in name.lower():
                return profile
    raise ConfigError(
        f"--device jetson: a Jetson ({release_file} exists) but neither Orin nor Thor "
        f"(model / GPU names: {[n for n in names if n] or 'none'}); pass --device jetson-orin or jetson-thor"
    )
