"""Builders of quantized variants for tools/bench_engines.py: random weights of a preset, quantized with a
scheme, opened as an engine. Module-level functions (each bench cell runs in a spawned process)."""

from __future__ import annotations

from pathlib import Path

from vlash.engines.base import Engine
from vlash.policies.pi05.config import Pi05Config
from vlash.quant.api import open_quantized, quantize
from vlash.quant.calibration import FrameSpec


def _build(scheme: str, config: Pi05Config, workdir: Path, threads: int | None) -> Engine:
    from vlash.policies.formats.random_policy import write_random_policy  # extra: server

    source = write_random_policy(Path(workdir) / f"{config.name}-fp32", config.name)
    calibration = FrameSpec(episodes=4, frames_per_episode=2)
    out = quantize(source, Path(workdir) / f"{config.name}-{scheme}", scheme, calibration=calibration)
    return open_quantized(out, threads=threads)[0]


def torch_int8(config: Pi05Config, profile, workdir: Path, threads: int | None) -> Engine:
    return _build("torch-int8", config, workdir, threads)


def torch_int4(config: Pi05Config, profile, workdir: Path, threads: int | None) -> Engine:
    return _build("torch-int4", config, workdir, threads)


def onnx_int8_dynamic(config: Pi05Config, profile, workdir: Path, threads: int | None) -> Engine:
    return _build("onnx-int8-dynamic", config, workdir, threads)


def onnx_int8_static(config: Pi05Config, profile, workdir: Path, threads: int | None) -> Engine:
    return _build("onnx-int8-static", config, workdir, threads)
