import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vlash.policies.quantized.linear import Int4WeightLinear, Int8WeightLinear
from vlash.policies.quantized.packing import dequantize_int4, dequantize_int8


@pytest.mark.parametrize("bias", [True, False])
def test_int8_linear_equals_dequantized_reference(bias):
    linear = nn.Linear(64, 24, bias=bias)
    q = Int8WeightLinear.from_linear(linear)
    x = torch.randn(3, 5, 64)
    reference = F.linear(x, dequantize_int8(q.qweight, q.scale), linear.bias)
    torch.testing.assert_close(q(x), reference, rtol=0, atol=0)
    torch.testing.assert_close(q(x), linear(x), rtol=0.02, atol=0.02)


def test_int4_linear_equals_dequantized_reference():
    linear = nn.Linear(128, 16)
    q = Int4WeightLinear.from_linear(linear, group_size=32)
    x = torch.randn(2, 128)
    reference = F.linear(x, dequantize_int4(q.qweight, q.scale), linear.bias)
    torch.testing.assert_close(q(x), reference, rtol=0, atol=0)
    assert q.qweight.shape == (16, 64) and q.qweight.dtype == torch.uint8


def test_quantized_linear_runs_in_the_input_dtype():
    q = Int8WeightLinear.from_linear(nn.Linear(32, 8))
    assert q(torch.randn(2, 32, dtype=torch.bfloat16)).dtype == torch.bfloat16


def test_state_dict_holds_integer_weights_only():
    state = Int4WeightLinear.from_linear(nn.Linear(64, 8), group_size=32).state_dict()
    assert set(state) == {"bias", "qweight", "scale"}
