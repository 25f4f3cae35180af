"""PyTorch engine: eager on CPU/CUDA, optionally a torch.compile'd denoise step, and on CUDA the denoise step
captured in a CUDA graph with static buffers (`cuda_graphs=True`, engines.cuda_graph)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from vlash.engines.base import Engine, register_engine
from vlash.engines.cuda_graph import CudaGraphStep
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model, PrefixCache

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


@register_engine("torch")
class TorchEngine(Engine):
    def __init__(self, model: Pi05Model, compile_mode: str | None = None, cuda_graphs: bool = False) -> None:
        device = next(model.parameters()).device
        super().__init__(model.config, device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise EngineUnavailable("torch engine: CUDA requested but torch.cuda.is_available() is False")
        if compile_mode is not None and compile_mode not in COMPILE_MODES:
            raise ConfigError(f"compile_mode must be None or one of {COMPILE_MODES}, got {compile_mode!r}")
        if cuda_graphs and device.type != "cuda":
            raise ConfigError(f"cuda_graphs needs the model on a CUDA device, it is on {device}")
        if cuda_graphs and compile_mode == "reduce-overhead":
            raise ConfigError("compile_mode='reduce-overhead' already captures CUDA graphs; drop cuda_graphs")
        self.model = model.eval()
        self.compile_mode = compile_mode
        self.cuda_graphs = cuda_graphs
        step = model.denoise_step
        step = torch.compile(step, mode=compile_mode, fullgraph=True) if compile_mode else step
        self._step = CudaGraphStep(step) if cuda_graphs else step

    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        return self.model.prefill(inputs)  # no_grad inside; the cache stays usable by guided (autograd) steps

    def denoise_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        return self._step(x_t, tau, cache)  # callers wrap in no_grad unless they need a VJP (guided RTC)

    @property
    def can_shrink_batch(self) -> bool:
        """False when the step replays captured CUDA graphs (cuda_graphs, compile_mode="reduce-overhead"): one graph
        per batch size, so a batch that shrinks would capture a new graph mid-request."""
        return not (self.cuda_graphs or self.compile_mode == "reduce-overhead")

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "compile": (self.compile_mode or "eager") + (" + cuda graph" if self.cuda_graphs else ""),
            "threads": torch.get_num_threads(),
            "quant": getattr(self.model, "quant_scheme", None),  # quant/ weight-only scheme, None for float
        }
