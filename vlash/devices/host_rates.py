"""What this CPU actually does: its fp32 GEMM rate and its memory copy bandwidth, measured once and cached.

The `cpu` device profile's figures are one machine's; a roofline floor from them is wrong by whatever separates
that machine from this one (the 2-core VM runs a 4096^3 GEMM at ~155 GFLOP/s, not the 358 its AVX-512 peak
promises). `vlash bench` on a CPU therefore takes the floor from these measurements: the rate a large fp32 GEMM
reaches with the benchmark's thread count (the best a dense layer can do here) and the bytes per second of a
large array copy (read + write counted, like STREAM's copy).

Measured once per (CPU model, threads, torch version) and cached as JSON under the user cache directory
($VLASH_CACHE_DIR, else $XDG_CACHE_HOME/vlash, else ~/.cache/vlash); a measurement takes a few seconds. Measure on
a quiet machine: a busy one caches a low rate (`--remeasure` replaces it).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

from vlash.atomic import atomic_write
from vlash.devices.profile import DeviceProfile

CACHE_FILE = "host_rates.json"
GEMM_SIZE = 4096  # n of the n x n x n fp32 GEMM (large enough for the BLAS to reach its plateau)
COPY_MIB = 256  # array size of the copy (well past any cache)
REPEATS = 3  # best of


@dataclass(frozen=True)
class HostRates:
    gemm_gflops: float  # fp32 GEMM rate, GFLOP/s (2 n^3 per n x n x n product)
    memory_gbs: float  # array copy, GB/s (bytes read + bytes written)
    threads: int  # torch CPU threads the GEMM ran with
    cpu: str  # CPU model name
    torch: str  # torch version (its BLAS sets the GEMM rate)
    measured_at: str  # UTC, ISO 8601


def cache_key(cpu: str, threads: int, torch_version: str) -> str:
    return f"{cpu} | threads={threads} | torch={torch_version}"


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


def measure_gemm_gflops(size: int = GEMM_SIZE, repeats: int = REPEATS) -> float:
    """Best fp32 GEMM rate of `repeats` n x n x n products on torch's current threads, GFLOP/s."""
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    torch.mm(a, b)  # first call: BLAS set-up, thread pool start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e9


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


def measure_host_rates(threads: int, gemm_size: int = GEMM_SIZE, copy_mib: int = COPY_MIB) -> HostRates:
    """Measure now with `threads` torch threads (restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gflops = measure_gemm_gflops(gemm_size)
    finally:
        torch.set_num_threads(before)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    return HostRates(gflops, measure_copy_gbs(copy_mib), threads, cpu_model(), torch.__version__, stamp)


def cached_host_rates(threads: int, remeasure: bool = False, measure=measure_host_rates) -> tuple[HostRates, Path]:
    """(the rates for this CPU at `threads`, the cache file): from the cache, or measured now and cached."""
    path = cache_dir() / CACHE_FILE
    key = cache_key(cpu_model(), threads, torch.__version__)
    entries = _read(path)
    if not remeasure and key in entries:
        try:
            return HostRates(**entries[key]), path
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
    """`profile` with its bandwidth and fp32 peak replaced by the measured ones (the only figures a CPU floor
    uses: on a CPU the engines compute in fp32, and int8 weights only shrink the bytes)."""
    return replace(
        profile,
        name=f"{profile.name} (measured host)",
        memory_bandwidth_gbs=rates.memory_gbs,
        peak_tflops={profile.precision: rates.gemm_gflops / 1e3, "fp32": rates.gemm_gflops / 1e3},
    )
