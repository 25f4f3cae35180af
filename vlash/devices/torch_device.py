"""`--device` values -> a torch device: a device profile's device, "auto", or a torch device string."""

from __future__ import annotations

import torch

from vlash.devices.profile import is_profile_name, load_profile
from vlash.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """A profile name (configs/devices/) or "jetson" -> its torch device; "auto" -> cuda when visible, else
    cpu; anything else is parsed by torch (a cuda device must be visible)."""
    if is_profile_name(name):
        return torch.device(load_profile(name).device)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r}: no CUDA device visible to torch")
    return device
