"""`--device` values -> a torch device: a device profile's device, "auto", or a torch device string."""

from __future__ import annotations

import torch

from vlash.devices.cuda_check import check_cuda
from vlash.devices.profile import available_profiles, is_profile_name, load_profile
from vlash.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """A profile name (configs/devices/) or "jetson" -> its torch device; "auto" -> cuda when visible, else
    cpu; anything else is parsed by torch. A cuda device needs a torch that sees a GPU (`check_cuda`: one line
    naming the torch build found and the one needed)."""
    if is_profile_name(name):
        device = torch.device(load_profile(name).device)
    elif name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            device = torch.device(name)
        except RuntimeError:
            profiles = ", ".join(available_profiles())
            raise ConfigError(
                f"--device {name!r}: not cpu, cuda, cuda:N, auto, jetson or a device profile ({profiles})"
            ) from None
    if device.type == "cuda":
        check_cuda(name)
    return device
