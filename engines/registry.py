"""The engine backends by name (the module that implements each, the extra that installs it) and the names of the
torch engine's options. No torch here: the command line lists them before anything heavy loads;
`vlash.engines.base.create_engine` builds an engine."""

from __future__ import annotations

_REGISTRY: dict[str, tuple[str, str]] = {}  # name -> (module, extra to install)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # TorchEngine's
GRAPHS = ("chunk", "step")  # TorchEngine(graphs=...): a span per run of steps up to the next report, or per step


def declare_backend(name: str, module: str, extra: str) -> None:
    _REGISTRY[name] = (module, extra)


def available_engines() -> list[str]:
    return sorted(_REGISTRY)


declare_backend("torch", "vlash.engines.torch_engine", extra="dev")
declare_backend("onnxruntime", "vlash.engines.onnx_engine", extra="onnx")
declare_backend("tensorrt", "vlash.engines.tensorrt_engine", extra="trt")
