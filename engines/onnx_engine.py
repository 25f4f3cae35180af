"""ONNX Runtime engine over an exported artifact (vlash.engines.artifact): the prefill graph returns the PrefixCache
as explicit tensors, the denoise graph takes them back.

Inputs and outputs are bound with IO binding straight to torch tensors (CPU memory, or CUDA memory with the
CUDA / TensorRT providers), so a step copies nothing but x_t and tau when they are not already contiguous;
the cache tensors are bound once per prefill, not once per step.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from torch import Tensor

from vlash.devices.profile import DeviceProfile
from vlash.engines.artifact import DENOISE_OUTPUTS, PREFILL_INPUTS, PREFILL_OUTPUTS, ArtifactManifest
from vlash.engines.base import ArtifactEngine, register_engine
from vlash.errors import EngineUnavailable, ShapeError
from vlash.policies.pi05.model import Pi05Inputs, PrefixCache

log = logging.getLogger(__name__)
GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
SPINNING = "session.intra_op.allow_spinning"  # onnxruntime's session config key: "1" spin while waiting, "0" sleep
_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bool": torch.bool, "int64": torch.int64}


def choose_providers(profile: DeviceProfile | None, available: list[str] | None = None) -> list[str]:
    """The profile's preferred providers that this onnxruntime build has, CPU last; EngineUnavailable when the
    profile wants a GPU provider and none is installed (onnxruntime instead of onnxruntime-gpu)."""
    available = ort.get_available_providers() if available is None else available
    wanted = list(profile.ort_providers) if profile else ["CPUExecutionProvider"]
    chosen = [p for p in wanted if p in available and p != "CPUExecutionProvider"]
    if profile is not None and profile.device == "cuda" and not chosen:
        raise EngineUnavailable(
            f"device profile {profile.name!r} runs ONNX Runtime on the GPU ({', '.join(wanted)}), but this "
            f"onnxruntime has only {available}: `pip uninstall onnxruntime && pip install vlash[gpu]`"
        )
    return [*chosen, "CPUExecutionProvider"]


def check_session_providers(asked: list[str], running: list[str], graph: str) -> None:
    """EngineUnavailable when a session does not run on the first provider asked for: onnxruntime falls back to the
    next one with only a warning (the TensorRT provider does when TensorRT's libraries are missing), and a policy
    meant for the GPU would then serve from the CPU, silently slower."""
    if running[:1] != asked[:1]:
        raise EngineUnavailable(
            f"onnxruntime's {graph} session was asked for {asked[0]} but runs on {running} (onnxruntime's log says "
            "why; usually that provider's libraries are missing)"
        )


@register_engine("onnxruntime")
class OnnxRuntimeEngine(ArtifactEngine):
    def __init__(
        self,
        artifact: str | Path,
        profile: DeviceProfile | None = None,
        threads: int | None = None,
        spinning: bool = False,
    ) -> None:
        """spinning: onnxruntime's intra-op threads spin while they wait for work (its own default). Off here: beside
        one busy core a pi05-small chunk on 2 threads went 2.1x slower spinning, 1.7x not, and no slower quiet
        (docs/BENCHMARKS.md, "Steady on a shared machine")."""
        self.artifact = Path(artifact)
        self.manifest = ArtifactManifest.load(self.artifact)
        self.providers = choose_providers(profile)
        gpu = self.providers[0] in GPU_PROVIDERS
        if gpu and not torch.cuda.is_available():
            raise EngineUnavailable("onnxruntime on the GPU needs a CUDA build of torch for the I/O tensors")
        super().__init__(self.manifest.model_config, torch.device("cuda", 0) if gpu else torch.device("cpu"))
        self.threads = threads if threads is not None else (profile.threads if profile else 0)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        self.spinning = spinning
        options.add_session_config_entry(SPINNING, "1" if spinning else "0")
        self._prefill = ort.InferenceSession(
            str(self.manifest.path(self.artifact, "prefill")), options, providers=self.providers
        )
        self._denoise = ort.InferenceSession(
            str(self.manifest.path(self.artifact, "denoise")), options, providers=self.providers
        )
        for graph, session in (("prefill", self._prefill), ("denoise", self._denoise)):
            check_session_providers(self.providers, session.get_providers(), graph)
        self._specs = self.manifest.tensors
        # A time axis exported free (a name, not a number) takes tau [B, 1]; an older static export gets it broadcast.
        self.shared_time_graph = any(
            i.name == "tau" and not isinstance(i.shape[1], int) for i in self._denoise.get_inputs()
        )
        self._step_binding = self._denoise.io_binding()
        self._bound_cache: PrefixCache | None = None
        self._bound_tensors: list[Tensor] = []

    # ------------------------------------------------------------------ binding helpers
    def _tensor(self, name: str, value: Tensor) -> Tensor:
        spec = self._specs[name]
        if tuple(value.shape) != tuple(spec["shape"]):
            raise ShapeError(f"onnxruntime {name}: artifact expects {spec['shape']}, got {list(value.shape)}")
        return value.to(self.device, _TORCH_DTYPES[spec["dtype"]]).contiguous()

    def _tau(self, tau: Tensor) -> Tensor:
        """tau as the denoise graph takes it: [B, 1] as given where its time axis is free, else [B, H]."""
        batch, horizon = self._specs["tau"]["shape"]
        if tau.ndim == 2 and tuple(tau.shape) == (batch, 1):
            if self.shared_time_graph:
                return tau.to(self.device, _TORCH_DTYPES[self._specs["tau"]["dtype"]]).contiguous()
            tau = tau.expand(batch, horizon)
        return self._tensor("tau", tau)

    def _empty(self, name: str) -> Tensor:
        spec = self._specs[name]
        return torch.empty(spec["shape"], dtype=_TORCH_DTYPES[spec["dtype"]], device=self.device)

    def _bind(self, binding: ort.IOBinding, name: str, value: Tensor, output: bool = False) -> None:
        kind, index = self.device.type, self.device.index or 0
        dtype = np.dtype(self._specs[name]["dtype"])
        bind = binding.bind_output if output else binding.bind_input
        bind(name, kind, index, dtype, list(value.shape), value.data_ptr())

    # ------------------------------------------------------------------ Engine
    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        binding = self._prefill.io_binding()
        feeds = [self._tensor(name, getattr(inputs, name)) for name in PREFILL_INPUTS]
        for name, value in zip(PREFILL_INPUTS, feeds, strict=True):
            self._bind(binding, name, value)
        outputs = {name: self._empty(name) for name in PREFILL_OUTPUTS}  # fresh: a cache outlives the next prefill
        for name, value in outputs.items():
            self._bind(binding, name, value, output=True)
        self._prefill.run_with_iobinding(binding)
        return PrefixCache(**outputs)

    def denoise_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        if torch.is_grad_enabled() and x_t.requires_grad:
            raise EngineUnavailable("guided RTC differentiates through the denoise step: use the torch engine")
        binding = self._step_binding
        if cache is not self._bound_cache:  # bind the cache once per prefill
            self._bound_tensors = [self._tensor(name, getattr(cache, name)) for name in PREFILL_OUTPUTS]
            for name, value in zip(PREFILL_OUTPUTS, self._bound_tensors, strict=True):
                self._bind(binding, name, value)  # the list keeps converted copies alive while bound
            self._bound_cache = cache
        x_t, tau = self._tensor("x_t", x_t), self._tau(tau)
        self._bind(binding, "x_t", x_t)
        self._bind(binding, "tau", tau)
        velocity = self._empty(DENOISE_OUTPUTS[0])
        self._bind(binding, DENOISE_OUTPUTS[0], velocity, output=True)
        self._denoise.run_with_iobinding(binding)
        return velocity

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "dtype": self.manifest.precision,
            "compile": f"onnx opset {self.manifest.opset}",
            "threads": self.threads or "default",
            "shared_time": self.shared_time_graph,
            "spinning": self.spinning,
            "providers": self.providers,
            "quant": (self.manifest.quantization or {}).get("scheme"),
            "artifact": str(self.artifact),
        }
