"""Load any supported policy directory: vlash's own, a LeRobot pi0.5 directory (0.4.x to 0.6.x) or an openpi
PyTorch checkpoint, told apart by their files (vlash.policies.formats.layouts)."""

from __future__ import annotations

from pathlib import Path

import torch

from vlash.errors import CheckpointError
from vlash.policies.formats.base import CheckpointOptions, LoadedPolicy
from vlash.policies.formats.layouts import detect_layout
from vlash.policies.formats.lerobot import load_lerobot_policy
from vlash.policies.formats.openpi import load_openpi_policy
from vlash.policies.formats.vlash_dir import load_vlash_policy


def load_policy(
    directory: str | Path,
    dtype: str | torch.dtype = "fp32",
    device: str | torch.device = "cpu",
    options: CheckpointOptions | None = None,
) -> LoadedPolicy:
    """Load a vlash, LeRobot or openpi policy directory (detected from its files)."""
    options = options or CheckpointOptions()
    layout = detect_layout(directory)
    unused = options.unused_by(layout)
    if unused:
        raise CheckpointError(f"{directory} is a {layout} policy directory, which takes no {', '.join(unused)}")
    if layout == "vlash":
        return load_vlash_policy(Path(directory), dtype, device)
    if layout == "lerobot":
        return load_lerobot_policy(Path(directory), dtype, device, options)
    return load_openpi_policy(Path(directory), dtype, device, options)
