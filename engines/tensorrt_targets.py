"""Which GPUs a TensorRT build's plans run on, said in words after `vlash export --engine tensorrt` (no TensorRT
import: it reads what vlash.engines.tensorrt_build recorded in the manifest's notes).

TensorRT-RTX builds ahead of time without a GPU: with no compute capability asked for, one plan runs on every
Ampere-or-newer RTX-class target it knows (SM80, SM86, SM89, SM120, ...; Turing, SM75, only when asked). It has no
Hopper (SM90: H100, H200) and no Jetson (SM87 Orin, SM110 Thor) target: those take NVIDIA's TensorRT, which
JetPack ships on a Jetson, and which builds on the device itself.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

TURING = "SM75"  # a target TensorRT-RTX adds only when asked (a portable plan with it runs slower elsewhere)
NO_GPU = "no-gpu"  # = vlash.engines.tensorrt_cache.target_name() on a machine without a GPU


def aot_targets(trt: ModuleType, compute_capability: str | None) -> list[str]:
    """The compute capabilities a TensorRT-RTX plan is built for: the one asked for, else all its default ones."""
    if compute_capability is not None:
        return [compute_capability.upper()]
    return [name for name in trt.ComputeCapability.__members__ if name.startswith("SM") and name != TURING]


def describe_build(notes: dict[str, Any]) -> list[str]:
    """Short lines on a build recorded in `notes` (manifest.notes["tensorrt"]): what was built and for which GPUs,
    whether this machine can load it, and, for TensorRT-RTX, that it is no Jetson engine."""
    version, built_on = notes.get("version", "?"), notes.get("built_on", "")
    if notes.get("module") != "tensorrt_rtx":
        return [f"TensorRT {version} plans for this machine's GPU ({notes.get('target', '?')}); they load on that GPU"]
    gpus = ", ".join(notes.get("gpus") or [str(notes.get("target", "?"))])
    lines = [f"TensorRT-RTX {version} ahead-of-time plans for {gpus} (RTX-class GPUs; not H100 / H200, SM90)"]
    if built_on == NO_GPU:
        lines.append("they cannot load on this machine (no GPU): serve the artifact where one of those GPUs is")
    lines.append("not a Jetson engine: on a Jetson, export there with JetPack's TensorRT")
    return lines
