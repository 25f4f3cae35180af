"""pi0.5 (Physical Intelligence) in plain PyTorch: config, model, checkpoint conversion."""

from vlash.policies.pi05.config import GemmaConfig, Pi05Config, SiglipConfig, available_presets, load_preset
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model, PrefixCache

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
