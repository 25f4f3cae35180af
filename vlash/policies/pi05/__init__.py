"""pi0.5 (Physical Intelligence) in plain PyTorch: config, model, checkpoint conversion.

The config names import without torch (command-line checks read presets before anything heavy loads); the model
names import torch on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from vlash.policies.pi05.config import GemmaConfig, Pi05Config, SiglipConfig, available_presets, load_preset

MODEL_NAMES = ("Pi05Inputs", "Pi05Model", "PrefixCache")  # from vlash.policies.pi05.model, imported when asked for

__all__ = [
    "GemmaConfig",
    "Pi05Config",
    "Pi05Inputs",
    "Pi05Model",
    "PrefixCache",
    "SiglipConfig",
    "available_presets",
    "load_preset",
]


def __getattr__(name: str) -> Any:
    if name in MODEL_NAMES:
        return getattr(importlib.import_module("vlash.policies.pi05.model"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
