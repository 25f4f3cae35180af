"""TensorRT engine over an exported artifact with built plans (`vlash export --engine tensorrt`).

I/O goes through torch CUDA tensors (addresses bound with set_tensor_address; no pycuda). The denoise step
runs on static buffers and is replayed as a CUDA graph: the cache is copied into the static buffers once per
prefill, x_t / tau once per step. A plan built for another GPU, TensorRT version or model (cache key in the
manifest) is rebuilt from the artifact's ONNX through the engine cache instead of being loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from vlash.engines.artifact import CACHE_TENSORS, DENOISE_OUTPUTS, PREFILL_INPUTS, ArtifactManifest
from vlash.engines.base import ArtifactEngine, register_engine
from vlash.engines.tensorrt_build import GRAPHS, build_engine, import_tensorrt
from vlash.engines.tensorrt_cache import EngineCache, cache_key, target_name
from vlash.errors import EngineUnavailable
from vlash.policies.pi05.model import Pi05Inputs, PrefixCache


def _torch_dtype(trt, dtype) -> torch.dtype:
    table = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "BOOL": torch.bool}
    table.update({"INT64": torch.int64, "INT32": torch.int32, "INT8": torch.int8})
    return table[dtype.name]


class _Graph:
    """One deserialized engine + execution context with torch-allocated outputs."""

    def __init__(self, trt, runtime, plan: bytes) -> None:
        self.trt = trt
        self.engine = runtime.deserialize_cuda_engine(plan)
        if self.engine is None:
            raise EngineUnavailable("TensorRT could not deserialize the plan (built for another GPU / version?)")
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        for n in names:  # an input with a free dim (tau's time axis) runs the one shape its profile pins
            free = -1 in tuple(self.engine.get_tensor_shape(n))
            if free and self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT:
                self.context.set_input_shape(n, self.engine.get_tensor_profile_shape(n, 0)[1])
        self.dtypes = {n: _torch_dtype(trt, self.engine.get_tensor_dtype(n)) for n in names}
        self.shapes = {n: tuple(self.context.get_tensor_shape(n)) for n in names}

    def empty(self, name: str) -> Tensor:
        return torch.empty(self.shapes[name], dtype=self.dtypes[name], device="cuda")

    def bind(self, name: str, tensor: Tensor) -> Tensor:
        tensor = tensor.to("cuda", self.dtypes[name]).contiguous()
        self.context.set_tensor_address(name, tensor.data_ptr())
        return tensor

    def run(self, stream: torch.cuda.Stream) -> None:
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise EngineUnavailable("TensorRT execute_async_v3 failed")


@register_engine("tensorrt")
class TensorRTEngine(ArtifactEngine):
    def __init__(
        self, artifact: str | Path, profile: Any = None, threads: int | None = None, cuda_graphs: bool = True
    ) -> None:
        if not torch.cuda.is_available():
            raise EngineUnavailable("the tensorrt engine needs a CUDA GPU and a CUDA build of torch")
        self.trt = import_tensorrt()
        self.artifact = Path(artifact)
        self.manifest = ArtifactManifest.load(self.artifact)
        super().__init__(self.manifest.model_config, torch.device("cuda", 0))
        runtime = self.trt.Runtime(self.trt.Logger(self.trt.Logger.WARNING))
        self.prefill_graph = _Graph(self.trt, runtime, self._plan("prefill"))
        self.denoise_graph = _Graph(self.trt, runtime, self._plan("denoise"))
        self.stream = torch.cuda.Stream()
        self.use_cuda_graphs = cuda_graphs if profile is None else bool(getattr(profile, "cuda_graphs", cuda_graphs))
        g = self.denoise_graph
        self._static = {n: g.bind(n, g.empty(n)) for n in ("x_t", "tau", *CACHE_TENSORS, *DENOISE_OUTPUTS)}
        self._graph: torch.cuda.CUDAGraph | None = None
        self._loaded: PrefixCache | None = None

    def _plan(self, graph: str) -> bytes:
        """The artifact's plan when its cache key matches this GPU / TensorRT; else rebuilt via the cache."""
        notes = self.manifest.notes.get("tensorrt", {})
        source = self.artifact / notes.get("sources", {}).get(graph, self.manifest.onnx[graph])
        key = cache_key(source, self.manifest.precision, self.trt.__version__, target_name())
        built_for = notes.get("cache_keys", {}).get(graph)
        plan_file = self.artifact / self.manifest.files.get(graph, f"{graph}.plan")
        if built_for == key and plan_file.is_file():
            return plan_file.read_bytes()
        shapes = {name: spec["shape"] for name, spec in self.manifest.tensors.items()}
        return EngineCache().get_or_build(key, lambda: build_engine(source, self.manifest.precision, shapes=shapes))

    def prefill(self, inputs: Pi05Inputs) -> PrefixCache:
        g = self.prefill_graph
        with torch.cuda.stream(self.stream):
            feeds = [g.bind(n, getattr(inputs, n)) for n in PREFILL_INPUTS]  # noqa: F841 (kept alive while running)
            outputs = {n: g.bind(n, g.empty(n)) for n in CACHE_TENSORS}
            g.run(self.stream)
        self.stream.synchronize()
        return PrefixCache(**outputs)

    def _load_cache(self, cache: PrefixCache) -> None:
        if cache is not self._loaded:
            for name in CACHE_TENSORS:
                self._static[name].copy_(getattr(cache, name))
            self._loaded = cache

    def _capture(self) -> None:
        with torch.cuda.stream(self.stream):
            self.denoise_graph.run(self.stream)  # one plain run first (TensorRT allocates lazily)
        self.stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):
            self.denoise_graph.run(self.stream)
        self._graph = graph

    def denoise_step(self, x_t: Tensor, tau: Tensor, cache: PrefixCache) -> Tensor:
        if torch.is_grad_enabled() and x_t.requires_grad:
            raise EngineUnavailable("guided RTC differentiates through the denoise step: use the torch engine")
        self._load_cache(cache)
        self._static["x_t"].copy_(x_t)
        self._static["tau"].copy_(tau)
        torch.cuda.current_stream().synchronize()
        if self.use_cuda_graphs:
            if self._graph is None:
                self._capture()
            self._graph.replay()
        else:
            with torch.cuda.stream(self.stream):
                self.denoise_graph.run(self.stream)
        self.stream.synchronize()
        return self._static[DENOISE_OUTPUTS[0]].float().clone()

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "dtype": self.manifest.precision,
            "compile": f"{self.trt.__name__} {self.trt.__version__}",
            "cuda_graphs": self.use_cuda_graphs,
            "graphs": list(GRAPHS),
        }
