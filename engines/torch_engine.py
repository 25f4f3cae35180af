"""PyTorch engine: eager on CPU/CUDA, optionally torch.compile'd (the prefill and the denoise step), or run from
static buffers as whole programs (`graphs="chunk"` or `"step"`, engines.static_program): on a GPU, the prefill and
the denoise steps captured as CUDA graphs and replayed with no Python between their kernels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import torch
from torch import Tensor

from vlash.engines.base import Engine, register_engine
from vlash.engines.registry import COMPILE_MODES, GRAPHS
from vlash.engines.static_program import StaticPrograms
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model, PrefixCache
from vlash.sampling.span import StepSpan

StepFn = Callable[[Tensor, Tensor, PrefixCache], Tensor]
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
    """`step` called on `_graph_input`s."""

    def call(x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        return step(_graph_input(x_t), _graph_input(tau), _graph_cache(cache))

    return call


@register_engine("torch")
class TorchEngine(Engine):
    def __init__(
        self,
        model: Pi05Model,
        compile_mode: str | None = None,
        graphs: str | None = None,
        compile_prefill: bool = True,
    ) -> None:
        """`compile_mode` compiles the denoise step and, unless `compile_prefill=False`, the whole prefill: fullgraph,
        that mode; each graph builds on its first call (Engine.warmup). `graphs` ("chunk" or "step") runs the prefill
        and the denoise spans as static programs instead (engines.static_program), compiled with `compile_mode` if
        given: captured as CUDA graphs on a GPU, run directly from their static buffers on the CPU."""
        device = next(model.parameters()).device
        super().__init__(model.config, device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise EngineUnavailable("torch engine: CUDA requested but torch.cuda.is_available() is False")
        if compile_mode is not None and compile_mode not in COMPILE_MODES:
            raise ConfigError(f"compile_mode must be None or one of {COMPILE_MODES}, got {compile_mode!r}")
        if graphs is not None and graphs not in GRAPHS:
            raise ConfigError(f"graphs must be None or one of {GRAPHS}, got {graphs!r}")
        if graphs and compile_mode == "reduce-overhead":
            raise ConfigError("compile_mode='reduce-overhead' captures CUDA graphs of its own; drop graphs")
        self.model = model.eval()
        self.compile_mode = compile_mode
        self.graphs = graphs
        self._programs = StaticPrograms(model, device.type == "cuda", compile_mode) if graphs else None
        self.compile_prefill = bool(compile_mode) and compile_prefill and not graphs
        options = dict(mode=compile_mode, fullgraph=True, dynamic=DYNAMIC)
        self._prefill = torch.compile(self._prefill_graph, **options) if self.compile_prefill else model.prefill
        self._step, self._guided = model.denoise_step, None
        if compile_mode and not graphs:  # with graphs the programs are compiled; single steps (guided RTC) run eager
            with torch.no_grad():  # builds the model's lazy time table now, not in the first traced step (whose
                model.time_condition(torch.zeros(1, self.config.action_horizon, device=device))  # guard would fail)
            self._step = _on_graph_inputs(torch.compile(model.denoise_step, **options))
            self._guided = _on_graph_inputs(torch.compile(self._differentiable_step, **options))

    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        """No autograd history in the cache: guided RTC differentiates only the denoise step, through the cache."""
        if self._programs is not None:
            self.model._check_inputs(inputs)  # a ShapeError here, not a failed capture
            return self._programs.prefill(inputs)
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
        if self._guided is not None and torch.is_grad_enabled():  # a VJP follows (guided RTC)
            return self._guided(x_t, tau, cache)
        return self._step(x_t, tau, cache)  # callers wrap in no_grad unless they need a VJP (guided RTC)

    def denoise_span(self, span: StepSpan, cache: PrefixCache) -> Tensor:
        if self._programs is None:
            return super().denoise_span(span, cache)
        self.model._check_suffix(span.x, span.taus[0])
        return self._programs.denoise_span(span, cache)

    @property
    def span_granularity(self) -> str | None:
        return self.graphs

    @property
    def programs(self) -> list[str]:
        """The static programs built so far (captured CUDA graphs on a GPU); empty without graphs."""
        return [] if self._programs is None else self._programs.programs

    # The compiled functions: code objects of their own (dynamo keeps graphs, and counts them, per code object).
    def _prefill_graph(self, inputs: Pi05Inputs) -> PrefixCache:
        return self.model.prefill(inputs)

    def _differentiable_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        return self.model.denoise_step(x_t, tau, cache)  # guided RTC's (autograd on): graphs apart from no-grad's

    @property
    def can_shrink_batch(self) -> bool:
        """False with static programs (graphs) and compile_mode="reduce-overhead": a program per batch size, so a batch
        that shrinks would build (capture) a new one mid-request."""
        return not (self.graphs or self.compile_mode == "reduce-overhead")

    def describe(self) -> dict[str, Any]:
        if self.graphs:
            captured = "cuda graphs" if self.device.type == "cuda" else "static programs, not captured"
            compiled = f"{self.compile_mode or 'eager'} + {captured} ({self.graphs})"
        elif self.compile_mode:
            compiled = f"{self.compile_mode} ({'prefill + step' if self.compile_prefill else 'step'})"
        else:
            compiled = "eager"
        return {
            **super().describe(),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "compile": compiled,
            "threads": torch.get_num_threads(),
            "quant": getattr(self.model, "quant_scheme", None),  # quant/ weight-only scheme, None for float
        }
