"""resize_with_pad (openpi semantics) and the model image conversion."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vlash.policies.processing.image import ImageError, resize_with_pad, resized_shape, to_model_image


def _white(h: int, w: int, b: int | None = None) -> np.ndarray:
    shape = (h, w, 3) if b is None else (b, h, w, 3)
    return np.full(shape, 255, np.uint8)


def test_wide_image_is_padded_top_and_bottom() -> None:
    out = resize_with_pad(_white(480, 640))
    assert out.shape == (224, 224, 3) and out.dtype == np.uint8
    assert resized_shape(480, 640, 224, 224) == (168, 224)
    assert (out[:28] == 0).all() and (out[196:] == 0).all()  # (224 - 168) / 2 = 28 rows each side
    assert (out[28:196] == 255).all()


def test_tall_image_is_padded_left_and_right_odd_pixel_last() -> None:
    h, w = resized_shape(150, 100, 224, 224)
    assert (h, w) == (224, 149)  # int(100 / (150 / 224))
    out = resize_with_pad(_white(150, 100, b=2))
    assert out.shape == (2, 224, 224, 3)
    assert (out[:, :, :37] == 0).all() and (out[:, :, 186:] == 0).all()  # 75 columns: 37 left, 38 right
    assert (out[:, :, 37:186] == 255).all()


def test_target_size_is_returned_unchanged_and_upscale_works() -> None:
    img = np.random.default_rng(0).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    np.testing.assert_array_equal(resize_with_pad(img), img)
    up = resize_with_pad(_white(56, 112))  # upscale by 2: 112 x 224, padded 56 rows top and bottom
    assert (up[:56] == 0).all() and (up[56:168] == 255).all() and (up[168:] == 0).all()


def test_downscale_filters_match_hand_computed_kernels() -> None:
    # Values are multiples of 64 so both filters give exact integers (no rounding ties).
    img = (np.random.default_rng(1).integers(0, 4, (448, 448, 3)) * 64).astype(np.uint8)
    x = img.astype(np.float64)
    box = (x[0::2, 0::2] + x[1::2, 0::2] + x[0::2, 1::2] + x[1::2, 1::2]) / 4  # plain bilinear at 1/2
    np.testing.assert_array_equal(resize_with_pad(img, antialias=False), box)
    # Antialiased (jax.image.resize / PIL): triangle filter of width 2 -> taps [1, 3, 3, 1] / 8 per axis.
    taps = np.array([1, 3, 3, 1]) / 8
    # Output pixel i is centred on input 2i + 1, so its taps are inputs 2i - 1 .. 2i + 2; i = 1 .. 222.
    rows = sum(t * x[1 + k : 1 + k + 443 : 2] for k, t in enumerate(taps))
    want = sum(t * rows[:, 1 + k : 1 + k + 443 : 2] for k, t in enumerate(taps))
    np.testing.assert_array_equal(resize_with_pad(img)[1:-1, 1:-1], want)


def test_to_model_image_range_layout_and_padding() -> None:
    img = np.zeros((2, 100, 200, 3), np.uint8)
    img[..., 0] = 255
    img[..., 1] = 51
    out = to_model_image(img)
    assert out.shape == (2, 3, 224, 224) and out.dtype == torch.float32
    assert out.min() >= -1.0 and out.max() <= 1.0
    assert (out[:, :, :56] == -1.0).all() and (out[:, :, 168:] == -1.0).all()  # zero padding -> -1
    inner = out[:, :, 56:168]
    torch.testing.assert_close(inner[:, 0], torch.ones_like(inner[:, 0]))
    torch.testing.assert_close(inner[:, 1], torch.full_like(inner[:, 1], 51 / 255 * 2 - 1))
    torch.testing.assert_close(inner[:, 2], torch.full_like(inner[:, 2], -1.0))
    single = to_model_image(torch.from_numpy(img[0]))
    torch.testing.assert_close(single, out[:1])


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.zeros((10, 10, 3), np.float32), "uint8"),
        (np.zeros((10, 10, 4), np.uint8), r"\[H, W, 3\]"),
        (np.zeros((10, 3), np.uint8), "shape"),
        (np.zeros((1000, 1, 3), np.uint8), "too thin"),
    ],
)
def test_bad_images_raise(bad: np.ndarray, match: str) -> None:
    with pytest.raises(ImageError, match=match):
        resize_with_pad(bad)
