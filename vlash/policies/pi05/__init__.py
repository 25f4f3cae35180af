"""pi0.5 (Physical Intelligence) in plain PyTorch: config, model, checkpoint conversion.

The config names import without torch (command-line checks read presets before anything heavy loads); the model
names import torch on first use.
"""

from vlash.lazy_exports import lazy_exports
from vlash.policies.pi05.config import GemmaConfig, Pi05Config, SiglipConfig, available_presets, load_preset

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
__getattr__ = lazy_exports(__name__, dict.fromkeys(("Pi05Inputs", "Pi05Model", "PrefixCache"), ".model"))
