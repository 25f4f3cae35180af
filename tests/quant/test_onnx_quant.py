"""ONNX int8 (dynamic and static QDQ on sim frames) of the micro policy: node selection, manifest, ORT runs it."""

import pytest

pytest.importorskip("onnxruntime")

from vlash.engines import create_engine  # noqa: E402
from vlash.engines.artifact import ArtifactManifest  # noqa: E402
from vlash.policies.policy_dir import load_policy  # noqa: E402
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
        assert quant["calibration"]["source"] == "robot_io.sim" and quant["calibration"]["seeds"] == [0, 1]
    else:
        assert quant["calibration"] is None
    policy = load_policy(micro_policy_dir)
    engine, _, name = open_quantized(out, threads=1)
    held_out = FrameSpec(tasks=("reach",), episodes=1, frames_per_episode=1, held_out=True)
    result = check_variant(name, create_engine("torch", model=policy.model), engine, policy, held_out=held_out)
    assert result.passed, result.reasons
