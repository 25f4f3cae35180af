"""pi0.5's prefill and denoise spans run from static buffers, captured as CUDA graphs on a GPU.

A CUDA graph replays the kernels it recorded, on the memory it recorded them with. So every input of a chunk is
copied into buffers allocated once per batch size (the prompt is already padded to the config's max_token_len and
the cameras to its slots by the processor), the prefill writes the K/V cache into static storage, and each denoise
span reads that storage and writes x into a static output. Programs, per batch size B:

    prefill(B)                  images, masks, tokens -> the static cache
    span(B, shared, held)       K denoise steps with their Euler updates (K = len(shared); vlash.sampling.span)

The runtime decides how many steps a span covers (`Engine.span_granularity`): "chunk" runs up to the next step that
streams something, so a constant-schedule chunk is the prefill and one span of all N steps, and a horizon-aware one
the prefill, step 0 (its first final actions leave after it) and one span of the rest; "step" runs one step per span
(one graph reused for every step k). Other spans (an early stop after fewer steps) get their own program on first use.

On a GPU each program is captured on its first use (warm-up runs on a side stream, then torch.cuda.graph) and
replayed from then on: no Python and no kernel launches between its kernels. On the CPU the same programs run
directly on the same buffers: what the tests compare with the dynamic path. `compile_mode` compiles each program
(torch.compile, fullgraph, static shapes) before it is captured.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from vlash.policies.pi05.model import Pi05Inputs, Pi05Model, PrefixCache
from vlash.sampling.span import StepSpan

log = logging.getLogger(__name__)
CACHE_FIELDS = tuple(f.name for f in fields(PrefixCache))
INPUT_FIELDS = tuple(f.name for f in fields(Pi05Inputs))
WARMUP_ITERS = 3  # runs before a capture (kernel selection, compilation, allocator) on a side stream


def prefill_function(model: Pi05Model) -> Callable[..., tuple[Tensor, ...]]:
    """The prefill as a function of tensors: (images, image_masks, tokens, token_masks) -> the cache's fields."""

    def prefill(images: Tensor, image_masks: Tensor, tokens: Tensor, token_masks: Tensor) -> tuple[Tensor, ...]:
        cache = model.prefill(Pi05Inputs(images, image_masks, tokens, token_masks))
        return tuple(getattr(cache, name) for name in CACHE_FIELDS)

    return prefill


def span_function(model: Pi05Model, shared: tuple[bool, ...], held: bool) -> Callable[..., Tensor]:
    """The denoise steps of a span as a function of tensors: (x, taus, dtaus, held mask, held values, *cache fields)
    -> x after them. `shared` and `held` are fixed: they pick the function's code, not its data."""

    def span(x: Tensor, taus: Tensor, dtaus: Tensor, mask: Tensor, values: Tensor, *cache_fields: Tensor) -> Tensor:
        cache = PrefixCache(*cache_fields)
        steps = StepSpan(0, x, taus, dtaus, shared, (mask, values) if held else None)
        return steps.run(lambda x_t, tau: model.denoise_step(x_t, tau, cache))

    return span


class _Program:
    """A function over static buffers: run directly, or captured once and replayed."""

    def __init__(self, name: str, run: Callable[[], None], capture: bool) -> None:
        self.name, self.run = name, run
        self.graph: torch.cuda.CUDAGraph | None = None
        if capture:
            self._capture()

    def _capture(self) -> None:
        start = time.perf_counter()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():  # warm-up on a side stream, as capture requires
            for _ in range(WARMUP_ITERS):
                self.run()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.run()
        log.info("captured CUDA graph %s in %.2f s", self.name, time.perf_counter() - start)

    def __call__(self) -> None:
        if self.graph is None:
            with torch.no_grad():
                self.run()
        else:
            self.graph.replay()


@dataclass
class _Storage:
    """The static inputs and cache of one batch size."""

    inputs: Pi05Inputs | None  # None until the first prefill of this batch size
    cache: PrefixCache  # written by the prefill program, read by every span program
    loaded: PrefixCache | None = None  # the cache object whose values `cache` holds now (by identity)


@dataclass
class _SpanBuffers:
    x: Tensor  # fp32 [B, H, A]
    taus: Tensor  # fp32 [K, B, H]
    dtaus: Tensor  # fp32 [K, B, H]
    mask: Tensor  # bool [B, H] (all False without a held prefix)
    values: Tensor  # fp32 [B, H, A]
    out: Tensor  # fp32 [B, H, A]: x after the span


class StaticPrograms:
    """The prefill and denoise-span programs of one model; see the module docstring."""

    def __init__(self, model: Pi05Model, capture: bool, compile_mode: str | None = None) -> None:
        self.model, self.capture, self.compile_mode = model, capture, compile_mode
        with torch.no_grad():  # the model's lazy time table, built now: not inside a traced or captured program
            device = next(model.parameters()).device
            model.time_condition(torch.zeros(1, model.config.action_horizon, device=device))
        self._storage: dict[int, _Storage] = {}
        self._prefills: dict[int, _Program] = {}
        self._spans: dict[tuple, tuple[_Program, _SpanBuffers]] = {}

    @property
    def programs(self) -> list[str]:
        """The names of the programs built so far (captured graphs on a GPU)."""
        return [p.name for p in self._prefills.values()] + [p.name for p, _ in self._spans.values()]

    def _compiled(self, fn: Callable) -> Callable:
        if self.compile_mode is None:
            return fn
        return torch.compile(fn, mode=self.compile_mode, fullgraph=True, dynamic=False)

    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        """The cache of `inputs` (a copy: the static storage is the next prefill's)."""
        batch = inputs.batch_size
        storage = self._storage.get(batch)
        if storage is None or storage.inputs is None:
            storage = self._new_storage(inputs, storage)
        for name in INPUT_FIELDS:
            getattr(storage.inputs, name).copy_(getattr(inputs, name))
        self._prefills[batch]()
        cache = PrefixCache(**{name: getattr(storage.cache, name).clone() for name in CACHE_FIELDS})
        storage.loaded = cache
        return cache

    def _new_storage(self, inputs: Pi05Inputs, storage: _Storage | None) -> _Storage:
        static = Pi05Inputs(**{name: torch.empty_like(getattr(inputs, name)) for name in INPUT_FIELDS})
        if storage is None:  # the cache's shapes: from one eager prefill
            with torch.no_grad():
                storage = _Storage(None, self.model.prefill(inputs))
        storage.inputs = static
        for name in INPUT_FIELDS:  # real values before a capture's warm-up runs (garbage token ids would fault)
            getattr(static, name).copy_(getattr(inputs, name))
        fn = self._compiled(prefill_function(self.model))

        def run() -> None:
            for name, value in zip(CACHE_FIELDS, fn(*(getattr(static, n) for n in INPUT_FIELDS)), strict=True):
                getattr(storage.cache, name).copy_(value)

        batch = inputs.batch_size
        self._storage[batch] = storage
        self._prefills[batch] = _Program(f"prefill(B={batch})", run, self.capture)
        return storage

    def denoise_span(self, span: StepSpan, cache: PrefixCache) -> Tensor:
        """x after the span's steps, on `cache` (copied into the static storage when it is not the one there)."""
        batch = span.x.shape[0]
        storage = self._storage.get(batch)
        if storage is None:  # spans before any prefill of this batch size (a caller's own cache)
            storage = self._storage[batch] = _Storage(None, PrefixCache(**_clones(cache)))
        if storage.loaded is not cache:
            for name in CACHE_FIELDS:
                getattr(storage.cache, name).copy_(getattr(cache, name))
            storage.loaded = cache
        key = (batch, span.shared, span.held is not None)
        if key not in self._spans:
            self._spans[key] = self._new_span(span, storage, key)
        program, buffers = self._spans[key]
        _load_span(buffers, span)
        program()
        return buffers.out.clone()

    def _new_span(self, span: StepSpan, storage: _Storage, key: tuple) -> tuple[_Program, _SpanBuffers]:
        x = span.x
        mask = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
        buffers = _SpanBuffers(
            x=torch.empty_like(x),
            taus=torch.empty_like(span.taus),
            dtaus=torch.empty_like(span.dtaus),
            mask=mask,
            values=torch.zeros_like(x),
            out=torch.empty_like(x),
        )
        _load_span(buffers, span)  # real values before a capture's warm-up runs
        fn = self._compiled(span_function(self.model, span.shared, span.held is not None))

        def run() -> None:
            cache = (getattr(storage.cache, name) for name in CACHE_FIELDS)
            buffers.out.copy_(fn(buffers.x, buffers.taus, buffers.dtaus, buffers.mask, buffers.values, *cache))

        name = f"span(B={key[0]}, steps={len(span.shared)}, shared={sum(span.shared)}, held={key[2]})"
        return _Program(name, run, self.capture), buffers


def _load_span(buffers: _SpanBuffers, span: StepSpan) -> None:
    buffers.x.copy_(span.x)
    buffers.taus.copy_(span.taus)
    buffers.dtaus.copy_(span.dtaus)
    if span.held is not None:
        buffers.mask.copy_(span.held[0])
        buffers.values.copy_(span.held[1])


def _clones(cache: PrefixCache) -> dict[str, Tensor]:
    return {name: getattr(cache, name).clone() for name in CACHE_FIELDS}
