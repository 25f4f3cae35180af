"""onnx-int8-dynamic computes the same on every CPU: onnxruntime's int8 products equal exact integer arithmetic.

With 8-bit weights, x86 CPUs without VNNI (AVX2) add pairs of u8 x s8 products in int16 and saturate, so the same
artifact gave the shipped policy an action cosine of 0.9787 here and 0.9945 on a VNNI machine. The reference
below replaces every MatMulInteger by a float MatMul of the zero-point-shifted integers (exact: the sums stay far
below 2^24), which is what a VNNI CPU computes.
"""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from vlash.policies.formats.loading import load_policy  # noqa: E402
from vlash.quant.api import quantize  # noqa: E402
from vlash.quant.calibration import FrameSpec, sim_inputs  # noqa: E402
from vlash.quant.onnx_quant import denoise_feeds, prefill_feeds  # noqa: E402

FRAMES = FrameSpec(tasks=("reach", "whack"), episodes=2, frames_per_episode=2, held_out=True)


def exact_integer_matmuls(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each MatMulInteger(a, b, a_zero, b_zero) computed as float (a - a_zero) @ (b - b_zero)."""
    nodes = []
    for node in model.graph.node:
        if node.op_type != "MatMulInteger":
            nodes.append(node)
            continue
        a, b, a_zero, b_zero = node.input
        p = node.name
        nodes += [helper.make_node("Cast", [x], [f"{p}/{i}f"], to=TensorProto.FLOAT) for i, x in enumerate(node.input)]
        nodes += [
            helper.make_node("Sub", [f"{p}/0f", f"{p}/2f"], [f"{p}/a"]),
            helper.make_node("Sub", [f"{p}/1f", f"{p}/3f"], [f"{p}/b"]),
            helper.make_node("MatMul", [f"{p}/a", f"{p}/b"], [f"{p}/ab"]),
            helper.make_node("Cast", [f"{p}/ab"], [node.output[0]], to=TensorProto.INT32),
        ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def dynamic_artifact(micro_policy_dir, tmp_path_factory):
    return quantize(micro_policy_dir, tmp_path_factory.mktemp("exact") / "dyn", "onnx-int8-dynamic")


@pytest.mark.parametrize("graph", ["prefill", "denoise"])
def test_int8_dynamic_graphs_equal_exact_integer_arithmetic(micro_policy_dir, dynamic_artifact, graph):
    policy = load_policy(micro_policy_dir)
    observations = [inputs for inputs, _ in sim_inputs(policy.processor, FRAMES)]
    feeds = prefill_feeds(observations) if graph == "prefill" else denoise_feeds(policy, observations[:1])
    model = onnx.load(str(dynamic_artifact / f"{graph}.onnx"))
    assert any(node.op_type == "MatMulInteger" for node in model.graph.node)
    quantized = _session(model)
    exact = _session(exact_integer_matmuls(model))
    names = [o.name for o in quantized.get_inputs()]
    for feed in feeds:
        feed = {name: feed[name] for name in names}
        for got, want in zip(quantized.run(None, feed), exact.run(None, feed), strict=True):
            scale, error = float(np.abs(want).max()) or 1.0, float(np.abs(got - want).max())
            assert error <= 1e-5 * scale, f"{graph}: int8 kernels {error:.3g} off exact integer products ({scale:.3g})"
