"""The engine interface every backend implements, and building one by name (the names: vlash.engines.registry)."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from vlash.engines.registry import _REGISTRY, available_engines
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.model import Pi05Inputs, PrefixCache
from vlash.sampling.span import StepSpan

if TYPE_CHECKING:
    from vlash.engines.artifact import ArtifactManifest


class Engine(ABC):
    """pi0.5 inference split into `prefill` (once per observation) and `denoise_step` (N times)."""

    name: str = "abstract"

    def __init__(self, config: Pi05Config, device: torch.device) -> None:
        self.config = config
        self.device = device

    @abstractmethod
    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        """Images + prompt -> per-layer K/V of the prefix."""

    @abstractmethod
    def denoise_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        """Velocity [B, H, A] for noisy actions x_t [B, H, A] (fp32) at times tau: per token [B, H], or [B, 1] when
        all of a row's tokens share one time (an engine whose graph cannot take [B, 1] broadcasts it)."""

    def denoise_span(self, span: StepSpan, cache: PrefixCache) -> Tensor:
        """x after the span's steps (fp32 [n, H, A]): `denoise_step` and the Euler update, per step. Engines with a
        static program (`span_granularity`) run a span without Python between its steps."""
        with torch.no_grad():
            return span.run(lambda x, tau: self.denoise_step(x, tau, cache))

    def spans(self, cache: PrefixCache) -> tuple[Callable[[StepSpan], Tensor], str] | None:
        """(run_span, granularity) on `cache` for FlowSampler.start's `spans`; None for an engine without spans."""
        granularity = self.span_granularity
        if granularity is None:
            return None
        return (lambda span: self.denoise_span(span, cache)), granularity

    @property
    def span_granularity(self) -> str | None:
        """How the runtime hands this engine its denoise steps: None, one `denoise_step` call per step (the
        sampler's Euler update in between); "step", one `denoise_span` per step; "chunk", one `denoise_span` per
        run of steps up to the next that streams something (all N steps of a constant-schedule chunk)."""
        return None

    @property
    def max_batch(self) -> int | None:
        """Rows one prefill / denoise step may carry: None = any; an engine of static shapes: its batch (a smaller
        batch is padded up to it by the caller)."""
        return None

    @property
    def can_shrink_batch(self) -> bool:
        """Whether a batch may lose rows between the denoise steps of one run (finished and cancelled rows leave
        x, so later steps evaluate fewer rows). False for an engine of static batch, and for one that captures a
        graph per batch size (a smaller batch would capture a new graph mid-request)."""
        return self.max_batch is None

    def synchronize(self) -> None:
        """Wait for queued device work (so wall-clock timings are honest)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def warmup(self, batch_size: int = 1, steps: int = 2) -> None:
        """Run prefill and a few steps on synthetic inputs (kernel selection, compilation, allocators); an engine
        of static batch warms up at its batch, whatever `batch_size` says."""
        cfg = self.config
        batch_size = self.max_batch or batch_size
        cache = self.prefill(random_inputs(cfg, batch=batch_size, device=self.device))
        x = torch.randn(batch_size, cfg.action_horizon, cfg.action_dim, device=self.device)
        per_token = torch.ones(batch_size, cfg.action_horizon, device=self.device)
        for tau in (per_token, per_token[:, :1]):  # both shapes the sampler passes (compiled graphs, CUDA graphs)
            for _ in range(steps):
                self.denoise_step(x, tau, cache)
        self.synchronize()

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "policy": self.config.name, "device": str(self.device)}


class ArtifactEngine(Engine):
    """An engine over an exported artifact (vlash.engines.artifact), whose shapes, the batch included, were fixed
    at export."""

    manifest: ArtifactManifest  # the artifact's manifest, loaded by the subclass's __init__

    @property
    def max_batch(self) -> int:
        """The artifact's static batch: every call carries exactly this many rows."""
        return self.manifest.batch


_LOADED: dict[str, type[Engine]] = {}


def register_engine(name: str) -> Callable[[type[Engine]], type[Engine]]:
    def wrap(cls: type[Engine]) -> type[Engine]:
        cls.name = name
        _LOADED[name] = cls
        return cls

    return wrap


def create_engine(name: str, **kwargs: Any) -> Engine:
    """Build the named backend; a missing optional dependency becomes EngineUnavailable with the fix."""
    if name not in _REGISTRY:
        raise ConfigError(f"unknown engine {name!r}; available: {', '.join(available_engines())}")
    module, extra = _REGISTRY[name]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise EngineUnavailable(f"engine {name!r} needs `pip install vlash[{extra}]` ({exc})") from exc
    return _LOADED[name](**kwargs)
