import pytest
import torch

from vlash.errors import ConfigError
from vlash.policies.quantized.packing import (
    dequantize_int4,
    dequantize_int8,
    pack_int4,
    quantize_int4,
    quantize_int8,
    unpack_int4,
)


def test_int4_pack_round_trip_covers_every_value():
    values = torch.arange(-8, 8, dtype=torch.int8).repeat(3, 4)[:, torch.randperm(64)]
    packed = pack_int4(values)
    assert packed.dtype == torch.uint8 and packed.shape == (3, 32)
    assert torch.equal(unpack_int4(packed), values)


def test_int4_packs_even_column_in_low_nibble():
    packed = pack_int4(torch.tensor([[-8, 7]]))  # stored as 0 and 15
    assert packed.item() == 0xF0


def test_int4_quantize_error_is_within_half_a_step_per_group():
    w = torch.randn(16, 128)
    packed, scale = quantize_int4(w, group_size=32)
    assert scale.shape == (16, 4)
    err = (dequantize_int4(packed, scale) - w).abs().view(16, 4, 32)
    assert bool((err <= scale[..., None] / 2 + 1e-6).all())


def test_int8_quantize_is_per_output_channel():
    w = torch.randn(8, 40) * torch.logspace(-3, 1, 8)[:, None]  # rows of very different magnitude
    q, scale = quantize_int8(w)
    assert q.dtype == torch.int8 and scale.shape == (8,)
    err = (dequantize_int8(q, scale) - w).abs()
    assert bool((err <= scale[:, None] / 2 + 1e-7).all())
    assert int(q.abs().amax(dim=1).min()) == 127  # every row uses its full range


def test_zero_rows_do_not_divide_by_zero():
    q, scale = quantize_int8(torch.zeros(2, 4))
    assert torch.isfinite(scale).all() and torch.equal(dequantize_int8(q, scale), torch.zeros(2, 4))


@pytest.mark.parametrize("group_size", [0, 3, 48])
def test_bad_group_sizes_are_config_errors(group_size):
    with pytest.raises(ConfigError):
        quantize_int4(torch.randn(4, 64), group_size)
