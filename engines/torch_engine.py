"""PyTorch engine: eager on CPU/CUDA, optionally torch.compile'd denoise step (CUDA graphs with
mode="reduce-overhead")."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from engines.base import Engine, register_engine
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model, PrefixCache

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


@register_engine("torch")
class TorchEngine(Engine):
    def __init__(self, model: Pi05Model, compile_mode: str | None = None) -> None:
        device = next(model.parameters()).device
        super().__init__(model.config, device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise EngineUnavailable("torch engine: CUDA requested but torch.cuda.is_available() is False")
        if compile_mode is not None and compile_mode not in COMPILE_MODES:
            raise ConfigError(f"compile_mode must be None or one of {COMPILE_MODES}, got {compile_mode!r}")
        self.model = model.eval()
        self.compile_mode = compile_mode
        step = model.denoise_step
        self._step = torch.compile(step, mode=compile_mode, fullgraph=True) if compile_mode else step

    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        return self.model.prefill(inputs)  # no_grad inside; the cache stays usable by guided (autograd) steps

    def denoise_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        return self._step(x_t, tau, cache)  # callers wrap in no_grad unless they need a VJP (guided RTC)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "compile": self.compile_mode or "eager",
            "threads": torch.get_num_threads(),
        }
