"""PyTorch engine: eager on CPU/CUDA, optionally torch.compile'd (the prefill and the denoise step), and on CUDA the
denoise step captured in a CUDA graph with static buffers (`cuda_graphs=True`, engines.cuda_graph)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch
from torch import Tensor

from vlash.engines.base import Engine, register_engine
from vlash.engines.cuda_graph import CudaGraphStep, StepFn
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model, PrefixCache

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
CACHE_FIELDS = tuple(f.name for f in fields(PrefixCache))
INPUT_FIELDS = tuple(f.name for f in fields(Pi05Inputs))

# Batch sizes change at run time (batched serving, rows leaving a batch), so the graphs compile with dynamic=None
# (automatic dynamic shapes) and every input's batch dimension marked dynamic (_graph_input): the first batch >= 2
# compiles a graph symbolic in the batch that serves every batch >= 2, and batch 1 gets one of its own (dynamo
# specializes sizes 0 and 1). Batches 1..8 thus cost the prefill 2 graphs, the step 4 ({1, >= 2} x tau [B, H] or
# [B, 1]) and guided RTC's step (autograd on, compiled apart: dynamo counts graphs per function) another 4, each
# within torch._dynamo.config.recompile_limit (8), past which dynamo silently runs eager. dynamic=False would build
# a graph per batch size (the step: 16); dynamic=True would make the fixed sizes symbolic too, for nothing.
DYNAMIC = None


def _graph_input(tensor: Tensor, batch_dim: int = 0) -> Tensor:
    """`tensor` as a compiled graph's input: contiguous storage of its own (dynamo guards a view's base and a
    tensor's strides, so the sampler's views, tau[:, :1] among them, and plain tensors would need graphs of their
    own), batch dimension marked dynamic (a hint: size 1 stays specialized)."""
    if tensor._base is not None or not tensor.is_contiguous():
        tensor = tensor.clone(memory_format=torch.contiguous_format)
    torch._dynamo.maybe_mark_dynamic(tensor, batch_dim)
    return tensor


def _graph_cache(cache: PrefixCache, clone: bool = False) -> PrefixCache:
    """The cache with every field a `_graph_input` (`clone`: each a copy); `cache` itself when that changes nothing
    (engines.cuda_graph recognises a cache by identity)."""
    plain = {}
    for name in CACHE_FIELDS:
        tensor = getattr(cache, name)
        tensor = tensor.clone(memory_format=torch.contiguous_format) if clone else tensor
        plain[name] = _graph_input(tensor, 1 if name in ("keys", "values") else 0)  # keys, values: [depth, B, ...]
    if all(tensor is getattr(cache, name) for name, tensor in plain.items()):
        return cache
    return PrefixCache(**plain)


def _on_graph_inputs(step: StepFn) -> StepFn:
    """`step` called on `_graph_input`s (engines.cuda_graph's static buffers included)."""

    def call(x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        return step(_graph_input(x_t), _graph_input(tau), _graph_cache(cache))

    return call


@register_engine("torch")
class TorchEngine(Engine):
    def __init__(
        self, model: Pi05Model, compile_mode: str | None = None, cuda_graphs: bool = False, compile_prefill: bool = True
    ) -> None:
        """`compile_mode` compiles the denoise step and, unless `compile_prefill=False`, the whole prefill: fullgraph,
        that mode; each graph builds on its first call (Engine.warmup)."""
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
        self.compile_prefill = bool(compile_mode) and compile_prefill
        options = dict(mode=compile_mode, fullgraph=True, dynamic=DYNAMIC)
        self._prefill = torch.compile(self._prefill_graph, **options) if self.compile_prefill else model.prefill
        step, self._guided = model.denoise_step, None
        if compile_mode:
            with torch.no_grad():  # builds the model's lazy time table now, not in the first traced step (whose
                model.time_condition(torch.zeros(1, self.config.action_horizon, device=device))  # guard would fail)
            step = _on_graph_inputs(torch.compile(step, **options))
            self._guided = _on_graph_inputs(torch.compile(self._differentiable_step, **options))
        self._step = CudaGraphStep(step) if cuda_graphs else step

    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        """No autograd history in the cache: guided RTC differentiates only the denoise step, through the cache."""
        if not self.compile_prefill:
            cache = self._prefill(inputs)  # no_grad inside
            return _graph_cache(cache) if self.compile_mode else cache  # the step's graph inputs, once per prefill
        self.model._check_inputs(inputs)  # eagerly: a traced raise would surface as a dynamo error, not ShapeError
        inputs = Pi05Inputs(**{name: _graph_input(getattr(inputs, name)) for name in INPUT_FIELDS})
        with torch.no_grad():  # the graph's grad mode (dynamo guards on it), whatever the caller's
            cache = self._prefill(inputs)
        # reduce-overhead: a CUDA-graph tree frees a replay's outputs at the next compiled call (here the first
        # denoise step); the cache lives for the whole chunk, so it gets storage of its own.
        return _graph_cache(cache, clone=self.compile_mode == "reduce-overhead")

    def denoise_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        if self._guided is not None and torch.is_grad_enabled():  # a VJP follows (guided RTC): no CUDA graph
            return self._guided(x_t, tau, cache)
        return self._step(x_t, tau, cache)  # callers wrap in no_grad unless they need a VJP (guided RTC)

    # The compiled functions: code objects of their own (dynamo keeps graphs, and counts them, per code object).
    def _prefill_graph(self, inputs: Pi05Inputs) -> PrefixCache:
        return self.model.prefill(inputs)

    def _differentiable_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        return self.model.denoise_step(x_t, tau, cache)  # guided RTC's (autograd on): graphs apart from no-grad's

    @property
    def can_shrink_batch(self) -> bool:
        """False when the step replays captured CUDA graphs (cuda_graphs, compile_mode="reduce-overhead"): one graph
        per batch size, so a batch that shrinks would capture a new graph mid-request."""
        return not (self.cuda_graphs or self.compile_mode == "reduce-overhead")

    def describe(self) -> dict[str, Any]:
        compiled = f"{self.compile_mode} ({'prefill + step' if self.compile_prefill else 'step'})"
        return {
            **super().describe(),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "compile": (compiled if self.compile_mode else "eager") + (" + cuda graph" if self.cuda_graphs else ""),
            "threads": torch.get_num_threads(),
            "quant": getattr(self.model, "quant_scheme", None),  # quant/ weight-only scheme, None for float
        }
