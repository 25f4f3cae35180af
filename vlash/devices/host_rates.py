"""What this CPU actually does: its fastest GEMM per precision and its memory copy bandwidth, measured once and
cached.

The `cpu` device profile's figures are one machine's; a roofline floor from them is wrong by whatever separates
that machine from this one. `vlash bench` on a CPU therefore takes the floor from these measurements: the best rate
of every GEMM kernel an engine can compute with (torch, oneDNN, onnxruntime: vlash.devices.gemm_kernels) with the
benchmark's thread count, and the bytes per second of a large array copy (read + write counted, like STREAM's
copy). The peak for a precision is the fastest kernel at that precision or a wider one (`peak_gflops`): an engine
that computes wider than its weights (int8 weights, fp32 matmuls) is bounded by the wider kernels too.

Measured once per (CPU model, threads, torch and onnxruntime versions) and cached as JSON under the user cache
directory ($VLASH_CACHE_DIR, else $XDG_CACHE_HOME/vlash, else ~/.cache/vlash); a measurement takes about ten
seconds. Measure on a quiet machine: a busy one caches a low rate, and a low peak is a floor an engine can beat
(`--remeasure` replaces it).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from vlash.atomic import atomic_write
from vlash.devices.gemm_kernels import GemmRate, measure_gemm_rates
from vlash.devices.profile import PRECISIONS, DeviceProfile
from vlash.devices.roofline import BYTES_PER_ELEMENT, canonical_precision

CACHE_FILE = "host_rates.json"
COPY_MIB = 256  # array size of the copy (well past any cache)
REPEATS = 3  # best of


@dataclass(frozen=True)
class HostRates:
    gemm_gflops: float  # the fastest fp32 GEMM kernel's rate, GFLOP/s (2 n^3 per n x n x n product)
    memory_gbs: float  # array copy, GB/s (bytes read + bytes written)
    threads: int  # CPU threads the kernels ran with
    cpu: str  # CPU model name
    torch: str  # torch version (its BLAS and oneDNN set two of the kernels' rates)
    measured_at: str  # UTC, ISO 8601
    kernels: tuple[GemmRate, ...] = ()  # every kernel's rate (gemm_kernels); none: gemm_gflops at every precision
    onnxruntime: str = ""  # onnxruntime's version ("" when it is not installed)

    def peak(self, precision: str) -> GemmRate | None:
        """The fastest kernel at `precision` or a wider one (more bytes per element), None when none was timed."""
        width = BYTES_PER_ELEMENT[canonical_precision(precision)]
        eligible = [k for k in self.kernels if BYTES_PER_ELEMENT[k.precision] >= width]
        return max(eligible, key=lambda k: k.gflops, default=None)

    def peak_gflops(self, precision: str) -> float:
        """GFLOP/s a `precision` engine's floor is computed from (`peak`; gemm_gflops without kernels)."""
        fastest = self.peak(precision)
        return max(fastest.gflops, self.gemm_gflops) if fastest is not None else self.gemm_gflops

    def describe(self, precisions: tuple[str, ...] = ("fp32", "bf16", "int8")) -> str:
        """ "373 GFLOP/s fp32 GEMM (onnxruntime MatMul, 512^3), 1476 GFLOP/s bf16 GEMM (torch mm, 1024^3), ...":
        each precision's peak and the kernel (with its precision when wider) and size that set it."""
        if not self.kernels:
            return f"{self.gemm_gflops:.0f} GFLOP/s fp32 GEMM"
        parts = []
        for precision in precisions:
            k = self.peak(precision)
            if k is not None:
                kernel = k.kernel if k.precision == precision else f"{k.kernel} {k.precision}"
                parts.append(f"{k.gflops:.0f} GFLOP/s {precision} GEMM ({kernel}, {k.size}^3)")
        return ", ".join(parts)

    @classmethod
    def from_dict(cls, doc: dict) -> HostRates:
        """From `asdict` (the cache); TypeError for an entry another version of this file wrote."""
        kernels = tuple(GemmRate(**k) for k in doc.get("kernels", ()))
        return cls(**{**doc, "kernels": kernels})


def onnxruntime_version() -> str:
    for dist in ("onnxruntime", "onnxruntime-gpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return ""


def cache_key(cpu: str, threads: int, torch_version: str, ort_version: str) -> str:
    return f"{cpu} | threads={threads} | torch={torch_version} | onnxruntime={ort_version or 'none'}"


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def cache_dir() -> Path:
    if os.environ.get("VLASH_CACHE_DIR"):
        return Path(os.environ["VLASH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vlash"


def measure_copy_gbs(mib: int = COPY_MIB, repeats: int = REPEATS) -> float:
    """Best copy bandwidth of `repeats` copies of a `mib` MiB array, GB/s (read + write bytes)."""
    src = np.ones(mib * 2**20 // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2.0 * src.nbytes / best / 1e9


def measure_host_rates(threads: int, copy_mib: int = COPY_MIB, measure_gemms=measure_gemm_rates) -> HostRates:
    """Measure now: every GEMM kernel with `threads` threads, then the copy bandwidth."""
    kernels = tuple(measure_gemms(threads))
    fp32 = max((k.gflops for k in kernels if k.precision == "fp32"), default=0.0)
    if not fp32 > 0:
        raise RuntimeError("no fp32 GEMM kernel could be timed on this host (torch.mm refused?)")
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    copy = measure_copy_gbs(copy_mib)
    return HostRates(fp32, copy, threads, cpu_model(), torch.__version__, stamp, kernels, onnxruntime_version())


def cached_host_rates(threads: int, remeasure: bool = False, measure=measure_host_rates) -> tuple[HostRates, Path]:
    """(the rates for this CPU at `threads`, the cache file): from the cache, or measured now and cached."""
    path = cache_dir() / CACHE_FILE
    key = cache_key(cpu_model(), threads, torch.__version__, onnxruntime_version())
    entries = _read(path)
    if not remeasure and key in entries:
        try:
            return HostRates.from_dict(entries[key]), path
        except TypeError:
            pass  # an entry from another version of this file: measure again
    rates = measure(threads)
    entries[key] = asdict(rates)
    text = json.dumps(entries, indent=2, sort_keys=True) + "\n"
    atomic_write(path, lambda f: f.write(text.encode()))
    return rates, path


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # missing or damaged: measured again and rewritten
    return doc if isinstance(doc, dict) else {}


def with_host_rates(profile: DeviceProfile, rates: HostRates) -> DeviceProfile:
    """`profile` with its bandwidth and every precision's peak replaced by the measured ones (`peak_gflops`)."""
    return replace(
        profile,
        name=f"{profile.name} (measured host)",
        memory_bandwidth_gbs=rates.memory_gbs,
        peak_tflops={precision: rates.peak_gflops(precision) / 1e3 for precision in PRECISIONS},
    )
