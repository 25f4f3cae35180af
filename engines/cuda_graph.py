"""The denoise step captured in a CUDA graph: static input/output buffers, the prefix cache copied into static
storage once per prefill, one `replay()` per step (no Python or kernel-launch overhead per layer).

One graph per batch size, captured on first use. A graph replays the exact kernels it recorded on the exact
buffers it recorded them with, so every call copies x_t and tau into the static inputs and the result out of
the static output (a clone: the next replay overwrites it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

import torch
from torch import Tensor

from vlash.policies.pi05.model import PrefixCache

StepFn = Callable[[Tensor, Tensor, PrefixCache], Tensor]
CACHE_FIELDS = tuple(f.name for f in fields(PrefixCache))


class _Captured:
    """Static buffers + the graph for one set of shapes."""

    def __init__(self, step: StepFn, x_t: Tensor, tau: Tensor, cache: PrefixCache, warmup_iters: int) -> None:
        self.x_t = torch.empty_like(x_t)
        self.tau = torch.empty_like(tau)
        self.cache = PrefixCache(**{name: torch.empty_like(getattr(cache, name)) for name in CACHE_FIELDS})
        self.load_cache(cache)
        self.x_t.copy_(x_t)
        self.tau.copy_(tau)
        self.graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():  # warm-up on a side stream, as capture requires
            for _ in range(warmup_iters):
                step(self.x_t, self.tau, self.cache)
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.out = step(self.x_t, self.tau, self.cache)
        self.source: PrefixCache | None = cache  # the cache whose contents sit in the static storage

    def load_cache(self, cache: PrefixCache) -> None:
        for name in CACHE_FIELDS:
            getattr(self.cache, name).copy_(getattr(cache, name))
        self.source = cache


class CudaGraphStep:
    """Callable like `Pi05Model.denoise_step`, replaying a captured graph per batch size."""

    def __init__(self, step: StepFn, warmup_iters: int = 3) -> None:
        self.step = step
        self.warmup_iters = warmup_iters
        self.graphs: dict[tuple, _Captured] = {}

    @staticmethod
    def _key(x_t: Tensor, tau: Tensor, cache: PrefixCache) -> tuple:
        return tuple((tuple(t.shape), t.dtype) for t in (x_t, tau, *(getattr(cache, n) for n in CACHE_FIELDS)))

    def __call__(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        if torch.is_grad_enabled() and x_t.requires_grad:  # guided RTC needs autograd: run eagerly
            return self.step(x_t, tau, cache)
        key = self._key(x_t, tau, cache)
        captured = self.graphs.get(key)
        if captured is None:
            captured = self.graphs[key] = _Captured(self.step, x_t, tau, cache, self.warmup_iters)
        elif captured.source is not cache:  # a new prefill: copy its cache into the static storage
            captured.load_cache(cache)
        captured.x_t.copy_(x_t)
        captured.tau.copy_(tau)
        captured.graph.replay()
        return captured.out.clone()
