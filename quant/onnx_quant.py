"""ONNX int8 quantization of exported artifacts (onnxruntime.quantization): dynamic, and static QDQ
calibrated on simulated frames. Also produces the QDQ graphs TensorRT builds its INT8 / FP8 engines from.

Which MatMuls are quantized follows quant.schemes: only those with a constant weight (never attention
scores), and in the denoise graph only the expert's MLP projections (attention projections, adaRMS, time
MLP and action in/out projections stay fp32).

Dynamic int8 and the CPU it runs on: onnxruntime multiplies dynamically quantized activations (uint8) with int8
weights. On x86 CPUs without VNNI (AVX2, AVX-512 without VNNI) its U8S8 kernel adds pairs of u8 x s8 products in
int16 (VPMADDUBSW), which saturates once a pair passes 32767 (2 x 255 x 127 = 64770 can); CPUs with VNNI add
them exactly. The same artifact then acts differently on different machines, and a gate measured on one
says nothing about the other (the shipped policy: action cosine 0.9945 exact, 0.9787 on an AVX2 CPU). So dynamic
weights use 7 bits (onnxruntime's `reduce_range`: 2 x 255 x 64 < 32767): exact on every CPU. The Gemma MLP
down projections of the prefill graph stay fp32: their input (gelu(gate) x up) has the activation outliers that
per-tensor dynamic activation scales handle worst (LLM.int8(), SmoothQuant). On the shipped policy, 7-bit weights
everywhere give a worst action cosine of 0.9915, and 0.9993 with these three kept fp32 (of 42 prefill MatMuls).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from vlash.engines.artifact import CACHE_TENSORS, PREFILL_INPUTS
from vlash.errors import EngineUnavailable
from vlash.policies.formats.base import LoadedPolicy
from vlash.quant.calibration import FrameSpec, sim_inputs
from vlash.sampling import FlowSampler, SamplerConfig

GRAPHS = ("prefill", "denoise")
# Node names of the exported denoise graph keep the module's leaf name (e.g. "/mlp/gate_proj_3/MatMul").
_DENOISE_QUANTIZABLE = re.compile(r"/mlp/(gate|up|down)_proj(_\d+)?/MatMul$")
# The Gemma VLM's MLP down projections in the prefill graph ("/mlp/down_proj_2/MatMul"; SigLIP's are "fc2").
_DYNAMIC_KEPT = {"prefill": re.compile(r"^/mlp/down_proj(_\d+)?/MatMul$")}
DYNAMIC_WEIGHT_BITS = 7  # reduce_range: no int16 saturation in non-VNNI U8S8 kernels (see the module docstring)
ONNXRUNTIME_FILES = f"{os.sep}onnxruntime{os.sep}"  # a log record's pathname inside the onnxruntime package

log = logging.getLogger(__name__)


def _onnx_quantization():
    try:
        import onnx  # extra: onnx
        from onnxruntime import quantization  # extra: onnx
    except ImportError as exc:
        raise EngineUnavailable(
            f"ONNX quantization needs onnx and onnxruntime (`pip install vlash[onnx]`): {exc}"
        ) from exc
    return onnx, quantization


@contextmanager
def root_advice_to_debug() -> Iterator[None]:
    """onnxruntime.quantization gives advice through the root logger (`logging.warning("Please consider to run
    pre-processing before quantization...")`), which reached `vlash quantize`'s output as "WARNING root:" lines: the
    graphs are vlash's own exports, with their shapes, and need no such pre-processing. While a quantization call
    runs, the root logger's records from onnxruntime below ERROR go to this module's logger at DEBUG instead
    (`vlash -v` shows them); everything else passes."""

    def demote(record: logging.LogRecord) -> bool:
        if record.name != "root" or record.levelno >= logging.ERROR or ONNXRUNTIME_FILES not in record.pathname:
            return True
        log.debug("onnxruntime: %s", record.getMessage().strip())
        return False

    root = logging.getLogger()
    root.addFilter(demote)
    try:
        yield
    finally:
        root.removeFilter(demote)


def quantizable_matmuls(path: str | Path, graph: str) -> list[str]:
    """Names of the MatMul nodes with a constant weight that the scheme policy allows to quantize."""
    onnx, _ = _onnx_quantization()
    model = onnx.load(str(path), load_external_data=False)
    constants = {init.name for init in model.graph.initializer}
    names = []
    for node in model.graph.node:
        if node.op_type != "MatMul" or len(node.input) < 2 or node.input[1] not in constants:
            continue
        if graph == "denoise" and not _DENOISE_QUANTIZABLE.search(node.name):
            continue
        names.append(node.name)
    return names


def prefill_feeds(observations: Sequence) -> list[dict[str, np.ndarray]]:
    return [{name: getattr(inputs, name).cpu().numpy() for name in PREFILL_INPUTS} for inputs in observations]


def denoise_feeds(policy: LoadedPolicy, observations: Sequence, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Inputs of every denoise step along the fp32 model's own sampling trajectories (real x_t and tau)."""
    model, cfg = policy.model, policy.config
    feeds: list[dict[str, np.ndarray]] = []
    with torch.no_grad():
        for i, inputs in enumerate(observations):
            cache = model.prefill(inputs)
            cached = {name: getattr(cache, name).cpu().numpy() for name in CACHE_TENSORS}

            def velocity(x, tau, cache=cache, cached=cached):
                feeds.append({"x_t": x.cpu().numpy(), "tau": tau.cpu().numpy(), **cached})
                return model.denoise_step(x, tau, cache).float()

            gen = torch.Generator().manual_seed(seed + i)
            noise = torch.randn(inputs.batch_size, cfg.action_horizon, cfg.action_dim, generator=gen)
            FlowSampler(SamplerConfig(num_steps=cfg.num_steps)).sample(velocity, noise)
    return feeds


def calibration_feeds(policy: LoadedPolicy, spec: FrameSpec) -> dict[str, list[dict[str, np.ndarray]]]:
    """Per graph, the calibration inputs of simulated frames (with the policy's prompts and states)."""
    observations = [inputs for inputs, _ in sim_inputs(policy.processor, spec)]
    return {"prefill": prefill_feeds(observations), "denoise": denoise_feeds(policy, observations)}


def _reader(feeds: list[dict[str, np.ndarray]]):
    _, quantization = _onnx_quantization()

    class FeedReader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self._iter: Iterator[dict[str, np.ndarray]] = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._iter, None)

        def rewind(self) -> None:
            self._iter = iter(feeds)

    return FeedReader()


def dynamic_plan(path: str | Path, graph: str) -> tuple[list[str], list[str]]:
    """(MatMul nodes the dynamic scheme quantizes, quantizable ones it keeps fp32 on purpose)."""
    kept_pattern = _DYNAMIC_KEPT.get(graph)
    nodes, kept = [], []
    for name in quantizable_matmuls(path, graph):
        (kept if kept_pattern is not None and kept_pattern.search(name) else nodes).append(name)
    return nodes, kept


def quantize_dynamic(src: Path, dst: Path, graph: str) -> tuple[list[str], list[str]]:
    """int8 storage of 7-bit weights (per channel, symmetric), uint8 activations quantized per call. Returns
    (the MatMul nodes quantized, those kept fp32)."""
    _, quantization = _onnx_quantization()
    nodes, kept = dynamic_plan(src, graph)
    with root_advice_to_debug():
        quantization.quantize_dynamic(
            str(src),
            str(dst),
            weight_type=quantization.QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            op_types_to_quantize=["MatMul"],
            nodes_to_quantize=nodes,
        )
    return nodes, kept


def quantize_static(
    src: Path, dst: Path, graph: str, feeds: list[dict[str, np.ndarray]], fp8: bool = False
) -> list[str]:
    """QDQ graph with int8 (or FP8 E4M3) weights per channel and activations per tensor, symmetric (zero
    point 0, as TensorRT's explicit quantization requires), ranges from `feeds` (MinMax)."""
    _, quantization = _onnx_quantization()
    nodes = quantizable_matmuls(src, graph)
    qtype = quantization.QuantType.QFLOAT8E4M3FN if fp8 else quantization.QuantType.QInt8
    # float8 scales come from the value distribution (onnxruntime supports only that method for it)
    method = quantization.CalibrationMethod.Distribution if fp8 else quantization.CalibrationMethod.MinMax
    with root_advice_to_debug():
        quantization.quantize_static(
            str(src),
            str(dst),
            _reader(feeds),
            quant_format=quantization.QuantFormat.QDQ,
            activation_type=qtype,
            weight_type=qtype,
            per_channel=not fp8,
            op_types_to_quantize=["MatMul"],
            nodes_to_quantize=nodes,
            calibrate_method=method,
            extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
        )
    return nodes
