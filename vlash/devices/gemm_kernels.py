"""The fastest GEMM this host runs, per precision, across every kernel library vlash's engines compute with.

A CPU roofline floor is only a floor if no engine can beat it, so its peak has to be the best rate any of the
engines' kernels reaches, not torch's alone: on an AMD Zen 5 torch's fp32 GEMM reached 208 GFLOP/s while
onnxruntime ran a whole chunk in 0.84x the floor made from it (issue 46). Measured here, each with the
benchmark's thread count:
- fp32: torch.mm (MKL), oneDNN's inner product (torch.utils.mkldnn), onnxruntime's MatMul (MLAS);
- bf16 and fp16: torch.mm (oneDNN; AMX or avx512_bf16 where the CPU has them), oneDNN's inner product in bf16;
- int8: onnxruntime's MatMulInteger (uint8 x int8, the dynamic-quantization kernel), torch._int_mm.
A kernel whose library is missing (onnxruntime is the `onnx` extra) or that this build refuses is left out: an
engine cannot use it either.

Each kernel times n x n x n products at n = 512, 1024, 2048, 4096 (the rate peaks at a size that depends on
the cache and the core count), best of up to REPEATS after one warm-up, and stops growing n when the next size
would not fit in its time budget (KERNEL_BUDGET_S): a slow host measures the small sizes only, a fast one reaches
4096. Its rate is the best product's; the median of that size's products goes beside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils import mkldnn  # oneDNN's inner product (part of torch)

SIZES = (512, 1024, 2048, 4096)  # n of the n x n x n products, grown while the kernel's time budget allows
REPEATS = 5  # timed products per size (after one warm-up), fewer when the budget runs out
KERNEL_BUDGET_S = 1.5  # seconds one kernel may take, all sizes together (a product already started finishes)


class KernelUnavailable(Exception):
    """This build of a kernel's library refuses the product (an operator or a dtype it lacks)."""


@dataclass(frozen=True)
class GemmRate:
    kernel: str  # e.g. "onnxruntime MatMul"
    precision: str  # fp32, bf16, fp16 or int8 (what the kernel multiplies in)
    size: int  # n of the n x n x n product that reached `gflops`
    gflops: float  # best product's rate, GFLOP/s (2 n^3 per product; int8: operations)
    median_gflops: float  # median of that size's products


Product = Callable[[], object]  # runs one n x n x n product


def _torch_mm(dtype: torch.dtype) -> Callable[[int], Product]:
    def build(n: int) -> Product:
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        return lambda: torch.mm(a, b)

    return build


def _onednn_linear(dtype: torch.dtype) -> Callable[[int], Product]:
    def build(n: int) -> Product:
        layer = mkldnn.to_mkldnn(torch.nn.Linear(n, n, bias=False), dtype)
        x = torch.randn(n, n).to(dtype).to_mkldnn()
        return lambda: layer(x)

    return build


def _torch_int_mm(n: int) -> Product:
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8)
    b = torch.randint(-128, 128, (n, n), dtype=torch.int8)
    return lambda: torch._int_mm(a, b)


def _onnxruntime(op: str, threads: int) -> Callable[[int], Product]:
    def build(n: int) -> Product:
        import onnxruntime as ort  # extra: onnx
        from onnx import TensorProto, helper  # extra: onnx

        a_type, b_type, out_type = (
            (TensorProto.FLOAT,) * 3 if op == "MatMul" else (TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32)
        )
        graph = helper.make_graph(
            [helper.make_node(op, ["A", "B"], ["C"])],
            f"gemm-{op}",
            [helper.make_tensor_value_info("A", a_type, [n, n]), helper.make_tensor_value_info("B", b_type, [n, n])],
            [helper.make_tensor_value_info("C", out_type, [n, n])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8  # readable by every onnxruntime the `onnx` extra allows
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        try:
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime's errors share no base class but Exception
            raise KernelUnavailable(f"onnxruntime {op}: {exc}") from exc
        rng = np.random.default_rng(0)
        if op == "MatMul":
            feeds = {"A": rng.standard_normal((n, n), np.float32), "B": rng.standard_normal((n, n), np.float32)}
        else:
            feeds = {"A": rng.integers(0, 256, (n, n), np.uint8), "B": rng.integers(-128, 128, (n, n), np.int8)}
        return lambda: session.run(None, feeds)

    return build


def kernels(threads: int) -> dict[tuple[str, str], Callable[[int], Product]]:
    """(kernel name, precision) -> a builder of one n x n x n product."""
    return {
        ("torch mm", "fp32"): _torch_mm(torch.float32),
        ("oneDNN linear", "fp32"): _onednn_linear(torch.float32),
        ("onnxruntime MatMul", "fp32"): _onnxruntime("MatMul", threads),
        ("torch mm", "bf16"): _torch_mm(torch.bfloat16),
        ("oneDNN linear", "bf16"): _onednn_linear(torch.bfloat16),
        ("torch mm", "fp16"): _torch_mm(torch.float16),
        ("onnxruntime MatMulInteger", "int8"): _onnxruntime("MatMulInteger", threads),
        ("torch _int_mm", "int8"): _torch_int_mm,
    }


def time_kernel(
    build: Callable[[int], Product], sizes=SIZES, repeats: int = REPEATS, budget_s: float = KERNEL_BUDGET_S
) -> tuple[int, float, float]:
    """(n, best GFLOP/s, median GFLOP/s at that n) of the size whose best product was fastest."""
    start = time.perf_counter()
    best: tuple[int, float, float] = (0, 0.0, 0.0)
    for n in sizes:
        product = build(n)
        product()  # warm-up: library set-up, thread pool start, pages faulted in
        seconds = []
        while len(seconds) < repeats and (not seconds or time.perf_counter() - start < budget_s):
            t0 = time.perf_counter()
            product()
            seconds.append(time.perf_counter() - t0)
        rates = [2.0 * n**3 / s / 1e9 for s in seconds]
        if max(rates) > best[1]:
            best = (n, max(rates), statistics.median(rates))
        left = budget_s - (time.perf_counter() - start)
        if 2 * 8 * min(seconds) > left:  # the next size's warm-up + one product (8x the work) would not fit
            break
    return best


def measure_gemm_rates(threads: int, sizes=SIZES, budget_s: float = KERNEL_BUDGET_S) -> list[GemmRate]:
    """Every kernel this host has, timed with `threads` torch / onnxruntime threads (torch's restored afterwards).
    A kernel that is missing or refused is left out."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    rates = []
    try:
        for (name, precision), build in kernels(threads).items():
            try:
                n, best, median = time_kernel(build, sizes, budget_s=budget_s)
            except (ImportError, RuntimeError, NotImplementedError, KernelUnavailable):
                continue  # not installed, or refused by this build / CPU: no engine computes with it either
            rates.append(GemmRate(name, precision, n, round(best, 1), round(median, 1)))
    finally:
        torch.set_num_threads(before)
    return rates
