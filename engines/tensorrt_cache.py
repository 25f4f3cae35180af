"""Cache of built TensorRT engines, keyed by model hash, precision, TensorRT version and GPU (or AOT target).

A plan is only valid for the exact graph, precision, TensorRT version and device it was built for; any
change gives a new key, so a stale plan is never loaded (it is rebuilt and stored under the new key).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from vlash.atomic import atomic_write


def default_cache_dir() -> Path:
    return Path(os.environ.get("VLASH_TRT_CACHE", Path.home() / ".cache" / "vlash" / "tensorrt"))


def model_hash(onnx_path: str | Path) -> str:
    """sha256 of the graph file and its external-data files (`<name>.data`), if any."""
    path = Path(onnx_path)
    digest = hashlib.sha256()
    for part in (path, path.with_name(path.name + ".data")):
        if part.is_file():
            with open(part, "rb") as f:
                while block := f.read(1 << 20):
                    digest.update(block)
    return digest.hexdigest()


def target_name(compute_capability: str | None = None) -> str:
    """The device a plan is built for: "aot-sm89" for an ahead-of-time target, else the visible GPU."""
    if compute_capability is not None:
        return f"aot-{compute_capability.lower()}"
    import torch  # extra: server

    if not torch.cuda.is_available():
        return "no-gpu"
    major, minor = torch.cuda.get_device_capability()
    return f"{torch.cuda.get_device_name()}-sm{major}{minor}".replace(" ", "_")


def cache_key(onnx_path: str | Path, precision: str, trt_version: str, target: str) -> str:
    text = "|".join((model_hash(onnx_path), precision, trt_version, target))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class EngineCache:
    """`<dir>/<key>.plan` files, written atomically."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.plan"

    def get(self, key: str) -> bytes | None:
        path = self.path(key)
        return path.read_bytes() if path.is_file() else None

    def put(self, key: str, plan: bytes) -> Path:
        return atomic_write(self.path(key), lambda f: f.write(plan))

    def get_or_build(self, key: str, build: Callable[[], bytes]) -> bytes:
        plan = self.get(key)
        if plan is None:
            plan = build()
            self.put(key, plan)
        return plan
