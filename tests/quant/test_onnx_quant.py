"""ONNX int8 (dynamic and static QDQ on sim frames) of the micro policy: node selection, manifest, ORT runs it."""

import pytest

pytest.importorskip("onnxruntime")

from vlash.engines import create_engine  # noqa: E402
from vlash.engines.artifact import ArtifactManifest  # noqa: E402
from vlash.policies.formats.loading import load_policy  # noqa: E402
from vlash.quant.api import open_quantized, quantize  # noqa: E402
from vlash.quant.calibration import FrameSpec  # noqa: E402
from vlash.quant.check import check_variant  # noqa: E402

CALIBRATION = FrameSpec(tasks=("reach", "whack"), episodes=2, frames_per_episode=2)


@pytest.mark.parametrize("scheme", ["onnx-int8-dynamic", "onnx-int8-static"])
def test_onnx_int8_artifact(micro_policy_dir, tmp_path, scheme):
    out = quantize(micro_policy_dir, tmp_path / scheme, scheme, calibration=CALIBRATION)
    quant = ArtifactManifest.load(out).quantization
    assert quant["scheme"] == scheme and quant["engine"] == "onnxruntime"
    layers = list(quant["layers"])
    denoise = [name for name in layers if name.startswith("denoise:")]
    assert denoise and all("/mlp/" in name for name in denoise)  # expert attention / adaRMS / time MLP kept fp32
    assert any(name.startswith("prefill:") and "q_proj" in name for name in layers)  # the VLM is quantized
    if scheme == "onnx-int8-static":
        assert quant["calibration"]["source"] == "vlash.sim" and quant["calibration"]["seeds"] == [0, 1]
    else:
        assert quant["calibration"] is None
    policy = load_policy(micro_policy_dir)
    engine, _, name = open_quantized(out, threads=1)
    held_out = FrameSpec(tasks=("reach",), episodes=1, frames_per_episode=1, held_out=True)
    result = check_variant(name, create_engine("torch", model=policy.model), engine, policy, held_out=held_out)
    assert result.passed, result.reasons


def test_dynamic_weights_fit_seven_bits_and_the_vlm_down_projections_stay_fp32(micro_policy_dir, tmp_path):
    """onnx-int8-dynamic stores 7-bit weights (|q| <= 64, so onnxruntime's non-VNNI U8S8 kernels cannot saturate)
    and keeps the Gemma MLP down projections of the prefill graph fp32, recording both in the manifest."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    out = quantize(micro_policy_dir, tmp_path / "dyn", "onnx-int8-dynamic")
    quant = ArtifactManifest.load(out).quantization
    assert quant["kept"] and all(name.startswith("prefill:/mlp/down_proj") for name in quant["kept"])
    assert all(spec["bits"] == 7 for spec in quant["layers"].values())
    assert quant["created_by"]["onnxruntime"]  # int8 numbers depend on it: recorded
    for graph in ("prefill", "denoise"):
        model = onnx.load(str(out / f"{graph}.onnx"))
        weights = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
        integer = [node for node in model.graph.node if node.op_type == "MatMulInteger"]
        assert integer and len(integer) == sum(name.startswith(f"{graph}:") for name in quant["layers"])
        for node in integer:
            assert weights[node.input[1]].dtype == np.int8 and np.abs(weights[node.input[1]]).max() <= 64, node.name
        fp32 = {node.name for node in model.graph.node if node.op_type == "MatMul"}
        assert {name.partition(":")[2] for name in quant["kept"] if name.startswith(f"{graph}:")} <= fp32
