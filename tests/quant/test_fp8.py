"""torch-fp8 (W8A8: fp8 e4m3 weights per output channel, activations per token, torch._scaled_mm): its arithmetic,
its plan (layers _scaled_mm cannot take stay in the compute dtype), the artifact round trip and the fidelity gate.
The CPU runs the same _scaled_mm a Hopper GPU does, so everything but the speed is checked here."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vlash.engines import create_engine
from vlash.policies.formats.loading import load_policy
from vlash.policies.quantized.linear import Fp8Linear
from vlash.policies.quantized.manifest import QuantManifest
from vlash.policies.quantized.packing import FP8, quantize_fp8_rows
from vlash.quant.api import open_quantized, quantize
from vlash.quant.check import check_variant
from vlash.quant.torch_quant import plan_layers


def test_fp8_rows_round_trip_within_e4m3_precision():
    x = torch.randn(64, 96) * torch.logspace(-3, 2, 64)[:, None]  # rows of very different ranges
    q, scale = quantize_fp8_rows(x)
    assert q.dtype == FP8 and scale.shape == (64, 1)
    assert (q.float().abs().amax(dim=1) == 448).all()  # each row's maximum maps onto e4m3's largest finite value
    error = (q.float() * scale - x).abs() / x.abs().amax(dim=1, keepdim=True)
    assert error.max() < 2**-4  # 3 mantissa bits: half a unit in the last place of the row maximum's binade


@pytest.mark.parametrize("bias", [True, False])
def test_fp8_linear_is_the_scaled_product_of_its_quantized_operands(bias):
    torch.manual_seed(0)
    linear = nn.Linear(64, 48, bias=bias)
    layer = Fp8Linear.from_linear(linear)
    x = torch.randn(2, 5, 64)
    xq, x_scale = quantize_fp8_rows(x.reshape(-1, 64))
    want = (xq.float() * x_scale) @ (layer.qweight.float() * layer.scale[:, None]).t()
    want = want.to(torch.bfloat16).float() + (linear.bias.detach() if bias else 0)  # _scaled_mm's bf16 output
    got = layer(x)
    assert got.shape == (2, 5, 48) and got.dtype == torch.float32
    torch.testing.assert_close(got.reshape(-1, 48), want, atol=1e-5, rtol=1e-5)
    rel = (got - linear(x)).norm() / linear(x).norm()
    assert rel < 0.05, rel  # close to the fp32 layer (fp8 keeps ~2 significant digits)


def test_a_differentiated_call_uses_the_dequantized_weights():
    """Guided RTC takes a VJP in x through the model; rounding x to fp8 has no gradient."""
    layer = Fp8Linear.from_linear(nn.Linear(32, 16))
    x = torch.randn(3, 32, requires_grad=True)
    layer(x).sum().backward()
    torch.testing.assert_close(x.grad, layer.dequantize().sum(dim=0).expand(3, 32))


def test_the_plan_keeps_what_scaled_mm_cannot_take(micro_policy_dir):
    """_scaled_mm needs inner and output sizes divisible by 16: micro's 24-wide k/v projections stay as they are."""
    model = load_policy(micro_policy_dir).model
    layers, kept = plan_layers(model, "torch-fp8")
    assert layers and all(spec["dtype"] == "fp8" for spec in layers.values())
    assert "vlm.layers.0.self_attn.k_proj" in kept and "vlm.layers.0.mlp.up_proj" in layers
    for name in layers:
        linear = model.get_submodule(name)
        assert linear.in_features % 16 == 0 and linear.out_features % 16 == 0


def test_a_torch_fp8_artifact_loads_serves_and_is_gated(micro_policy_dir, tmp_path):
    out = quantize(micro_policy_dir, tmp_path / "fp8", "torch-fp8")
    assert QuantManifest.read(out).scheme == "torch-fp8"
    engine, policy, scheme = open_quantized(out)
    assert scheme == "torch-fp8" and policy.model.quant_scheme == "torch-fp8"
    fp8 = [m for m in policy.model.modules() if isinstance(m, Fp8Linear)]
    assert fp8 and all(m.qweight.dtype == FP8 for m in fp8)
    source = load_policy(micro_policy_dir)
    reference = create_engine("torch", model=source.model)
    result = check_variant("torch-fp8", reference, engine, source)
    assert result.fidelity.cosine_min > 0.9, result.to_dict()  # random micro weights: a loose, real bound
    assert isinstance(result.passed, bool)
