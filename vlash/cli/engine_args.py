"""The torch engine's `--compile` and `--cuda-graphs` flags (vlash serve, vlash bench), checked in one line before
anything loads."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vlash.cli.flags import ConfigFlags
from vlash.engines.registry import COMPILE_MODES, GRAPHS
from vlash.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from vlash.devices import DeviceProfile


@dataclass(frozen=True)
class TorchEngineOptions:
    """The torch engine's compilation."""

    # torch.compile the prefill and the denoise steps (torch engine; reduce-overhead captures CUDA graphs)
    compile: str | None = field(default=None, metadata={"choices": COMPILE_MODES})
    # torch engine on a GPU: run the prefill and the denoise steps as captured CUDA graphs, all the steps between two
    # streamed pieces in one (chunk, the bare flag's) or one per step (step); default: the device profile's
    cuda_graphs: str | None = field(default=None, metadata={"choices": GRAPHS, "optional_value": "chunk"})


def torch_engine_flags(advanced: bool = True) -> ConfigFlags:
    """--compile and --cuda-graphs (under the command's advanced heading unless told)."""
    names = "compile cuda_graphs"
    return ConfigFlags(TorchEngineOptions, () if advanced else names, advanced=names if advanced else ())


def torch_engine_options(
    args: argparse.Namespace, engine: str, device: torch.device, profile: DeviceProfile | None
) -> dict[str, str | None]:
    """{compile_mode, graphs} for the torch engine (the flags, else the named device profile's graphs); ConfigError
    for flags given to another engine, and for CUDA graphs off a GPU."""
    if engine != "torch":
        if args.compile or args.cuda_graphs:
            raise ConfigError(f"--compile and --cuda-graphs apply to the torch engine, not {engine}")
        return {}
    if args.cuda_graphs is not None and device.type != "cuda":
        raise ConfigError(f"--cuda-graphs needs a CUDA device (--device cuda or a GPU profile), not {device}")
    if args.cuda_graphs is not None and args.compile == "reduce-overhead":
        raise ConfigError("--compile reduce-overhead captures CUDA graphs of its own: drop --cuda-graphs")
    graphs = args.cuda_graphs
    if graphs is None and profile is not None and args.compile != "reduce-overhead":
        graphs = profile.graphs
    return {"compile_mode": args.compile, "graphs": graphs if device.type == "cuda" else None}
