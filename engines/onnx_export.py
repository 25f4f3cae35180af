"""torch -> ONNX for the two graphs of pi0.5: prefill (images + prompt -> PrefixCache tensors) and one
denoise step (x_t, tau + PrefixCache tensors -> velocity). Static shapes, one batch size per export; only tau's
time axis is free (H, or 1 for one time shared by a row's tokens).

Uses the TorchScript exporter (`dynamo=False`), robust for fixed shapes; attention is traced through
`explicit_attention()` because SDPA's grouped-query flag does not export. Needs the `onnx` extra.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

from vlash.engines.artifact import (
    DENOISE_INPUTS,
    DENOISE_OUTPUTS,
    PRECISIONS,
    PREFILL_INPUTS,
    PREFILL_OUTPUTS,
    TIME_TOKENS_AXIS,
    ArtifactManifest,
    tensor_specs,
)
from vlash.errors import ConfigError, EngineUnavailable
from vlash.policies.pi05.examples import random_inputs
from vlash.policies.pi05.layers import explicit_attention
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model, PrefixCache

Progress = Callable[[float, str], None]  # (fraction done, what is happening)
MIN_OPSET = 17
SINGLE_FILE_LIMIT = 1 << 31  # protobuf's 2 GiB: larger graphs keep their weights in one <name>.data file
_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
# The one free dimension of an artifact: tau's time axis is H (a time per token) or 1 (one time shared by a row's
# tokens; the graph broadcasts it, conditioning each row once). Everything else is static.
TAU_AXES = {"tau": {1: TIME_TOKENS_AXIS}}


class PrefillGraph(nn.Module):
    """`Pi05Model.prefill` with the PrefixCache flattened into output tensors."""

    def __init__(self, model: Pi05Model) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: Tensor, image_masks: Tensor, tokens: Tensor, token_masks: Tensor) -> tuple[Tensor, ...]:
        cache = self.model.prefill(Pi05Inputs(images, image_masks, tokens, token_masks))
        return tuple(getattr(cache, name) for name in PREFILL_OUTPUTS)


class DenoiseGraph(nn.Module):
    """`Pi05Model.denoise_step` taking the PrefixCache as explicit tensors; velocity in fp32."""

    def __init__(self, model: Pi05Model) -> None:
        super().__init__()
        self.model = model

    def forward(self, x_t: Tensor, tau: Tensor, *cache_tensors: Tensor) -> Tensor:
        cache = PrefixCache(**dict(zip(PREFILL_OUTPUTS, cache_tensors, strict=True)))
        return self.model.denoise_step(x_t, tau, cache).float()


def example_tensors(model: Pi05Model, batch: int) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Traced example inputs of both graphs (the denoise ones built by running prefill)."""
    cfg = model.config
    inputs = random_inputs(cfg, batch=batch, device=next(model.parameters()).device)
    prefill_args = tuple(getattr(inputs, name) for name in PREFILL_INPUTS)
    with torch.no_grad():
        cache = model.prefill(inputs)
    x_t = torch.randn(batch, cfg.action_horizon, cfg.action_dim, device=inputs.images.device)
    tau = torch.rand(batch, cfg.action_horizon, device=inputs.images.device)
    return prefill_args, (x_t, tau, *(getattr(cache, name) for name in PREFILL_OUTPUTS))


def _export_graph(
    module: nn.Module,
    args: tuple[Tensor, ...],
    target: Path,
    names: tuple,
    opset: int,
    dynamic_axes: dict[str, dict[int, str]] | None = None,
) -> None:
    inputs, outputs = names
    with tempfile.TemporaryDirectory(prefix=".export-", dir=target.parent) as tmp:
        raw = Path(tmp) / target.name
        with torch.no_grad(), explicit_attention(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings about shape checks that are constant here
            torch.onnx.export(
                module,
                args,
                str(raw),
                input_names=list(inputs),
                output_names=list(outputs),
                opset_version=opset,
                do_constant_folding=True,
                dynamic_axes=dynamic_axes,
                dynamo=False,
            )
        if len(list(Path(tmp).iterdir())) == 1:  # weights inline: the file is complete
            shutil.move(raw, target)
            return
        import onnx  # extra: onnx; the exporter scattered >2 GiB weights over many files: gather them into one

        proto = onnx.load(str(raw))
        onnx.save_model(
            proto, str(target), save_as_external_data=True, all_tensors_to_one_file=True, location=target.name + ".data"
        )


def export_onnx(
    model: Pi05Model,
    out_dir: str | Path,
    precision: str = "fp32",
    batch: int = 1,
    opset: int = MIN_OPSET,
    progress: Progress | None = None,
    policy: str = "",
) -> ArtifactManifest:
    """Write prefill.onnx, denoise.onnx and manifest.json into `out_dir` (the caller stages it)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"ONNX export precision must be one of {PRECISIONS}, got {precision!r}")
    if opset < MIN_OPSET:
        raise ConfigError(f"ONNX opset must be >= {MIN_OPSET}, got {opset}")
    if batch < 1:
        raise ConfigError(f"export batch must be >= 1, got {batch}")
    try:
        import onnx  # noqa: F401  # extra: onnx (the exporter needs it)
    except ImportError as exc:
        raise EngineUnavailable(f"ONNX export needs `pip install vlash[onnx]` ({exc})") from exc
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = progress or (lambda fraction, label: None)
    dtype = _DTYPES[precision]
    model = model if model.dtype == dtype else copy.deepcopy(model).to(dtype)
    model = model.eval()
    report(0.05, "tracing example inputs")
    prefill_args, denoise_args = example_tensors(model, batch)
    report(0.1, "exporting prefill graph")
    _export_graph(PrefillGraph(model), prefill_args, out / "prefill.onnx", (PREFILL_INPUTS, PREFILL_OUTPUTS), opset)
    report(0.6, "exporting denoise graph")
    _export_graph(
        DenoiseGraph(model), denoise_args, out / "denoise.onnx", (DENOISE_INPUTS, DENOISE_OUTPUTS), opset, TAU_AXES
    )
    graphs = {"prefill": "prefill.onnx", "denoise": "denoise.onnx"}
    manifest = ArtifactManifest(
        engine="onnxruntime",
        precision=precision,
        batch=batch,
        config=model.config.to_dict(),
        policy=policy or model.config.name,
        opset=opset,
        files=dict(graphs),
        onnx=dict(graphs),
        tensors=tensor_specs(model.config, batch, precision),
        torch=torch.__version__,
    )
    manifest.save(out)
    report(1.0, "done")
    return manifest
