"""Camera images -> pi0.5 model input: aspect-preserving resize with centered zero padding, then [-1, 1].

``resize_with_pad`` follows openpi's ``image_tools.resize_with_pad`` (src/openpi/shared/image_tools.py and
the PIL copy in packages/openpi-client): scale by ``ratio = max(w / W, h / H)`` to
``(int(h / ratio), int(w / ratio))`` with bilinear filtering, round back to uint8, then pad with zeros,
centered, the odd pixel going to the bottom / right. An image already at the target size is returned
unchanged.

Resampling is torch's ``F.interpolate(mode="bilinear", align_corners=False)``. With ``antialias=True``
(default) it uses a triangle filter widened by the downscale factor, the filter of openpi's JAX path
(``jax.image.resize`` LINEAR, antialiased) and of PIL's BILINEAR (openpi client); with ``antialias=False``
it is plain 4-tap bilinear, as LeRobot's ``resize_with_pad_torch`` and openpi's PyTorch path do (those
resize [0, 1] floats without rounding to uint8; the difference is below 0.5/255). Measured against
jax.image.resize and PIL on random and smooth uint8 images (480x640, 720x1280, 256x256, 96x96, ...),
``antialias=True`` differs by at most 1 grey level: on ~0.01% of pixels vs JAX, ~5-20% vs PIL (PIL's
fixed-point arithmetic); the padding is identical.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from vlash.errors import VlashError

MODEL_IMAGE_SIZE = 224  # PaliGemma / SigLIP input resolution used by pi0.5


class ImageError(VlashError, ValueError):
    """An image has the wrong dtype, shape or size."""


def resized_shape(height: int, width: int, target_h: int, target_w: int) -> tuple[int, int]:
    """The (height, width) openpi resizes to before padding: aspect ratio kept, fits in the target."""
    ratio = max(width / target_w, height / target_h)
    out = (int(height / ratio), int(width / ratio))
    if min(out) < 1:
        raise ImageError(f"image {height}x{width} is too thin to resize into {target_h}x{target_w}")
    return out


def _tensor(images: np.ndarray) -> torch.Tensor:
    """A torch view of the array; a copy when it is read-only (frames received from a socket), which torch cannot
    view without a warning."""
    array = np.ascontiguousarray(images)
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def _as_uint8_bhwc(images: np.ndarray | torch.Tensor) -> tuple[torch.Tensor, bool]:
    """Torch uint8 ``[B, H, W, 3]`` and whether a batch axis was added."""
    x = _tensor(images) if isinstance(images, np.ndarray) else images
    if not isinstance(x, torch.Tensor):
        raise ImageError(f"expected a numpy array or torch tensor, got {type(images).__name__}")
    if x.dtype != torch.uint8:
        raise ImageError(f"expected uint8 images, got {x.dtype}")
    if x.ndim not in (3, 4) or x.shape[-1] != 3:
        raise ImageError(f"expected [H, W, 3] or [B, H, W, 3] images, got shape {tuple(x.shape)}")
    return (x[None], True) if x.ndim == 3 else (x, False)


def _resize_with_pad_bhwc(
    x: torch.Tensor, height: int, width: int, antialias: bool, round_to_uint8: bool = True
) -> torch.Tensor:
    """uint8 ``[B, H, W, C]`` -> ``[B, height, width, C]``: uint8 (openpi), or float32 in [0, 255] without rounding
    (`round_to_uint8=False`, LeRobot)."""
    cur_h, cur_w = x.shape[1], x.shape[2]
    if (cur_h, cur_w) == (height, width):
        return x if round_to_uint8 else x.to(torch.float32)
    new_h, new_w = resized_shape(cur_h, cur_w, height, width)
    chw = x.permute(0, 3, 1, 2).to(torch.float32)
    resized = F.interpolate(chw, size=(new_h, new_w), mode="bilinear", align_corners=False, antialias=antialias)
    resized = resized.round().clamp(0, 255).to(torch.uint8) if round_to_uint8 else resized.clamp(0, 255)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    padded = F.pad(resized, (left, width - new_w - left, top, height - new_h - top), value=0)
    return padded.permute(0, 2, 3, 1).contiguous()


def resize_with_pad(
    images: np.ndarray,
    height: int = MODEL_IMAGE_SIZE,
    width: int = MODEL_IMAGE_SIZE,
    *,
    antialias: bool = True,
) -> np.ndarray:
    """Resize uint8 ``[H, W, 3]`` or ``[B, H, W, 3]`` images to ``height x width`` keeping the aspect ratio.

    The image is centered and the rest is zero (black). Returns uint8 with the input's batch layout.
    """
    if height < 1 or width < 1:
        raise ImageError(f"target size must be positive, got {height}x{width}")
    x, added = _as_uint8_bhwc(images)
    out = _resize_with_pad_bhwc(x, height, width, antialias).numpy()
    return out[0] if added else out


def to_model_image(
    images: np.ndarray | torch.Tensor,
    size: int = MODEL_IMAGE_SIZE,
    *,
    antialias: bool = True,
    device: torch.device | str | None = None,
    pad_value: float = -1.0,
    round_to_uint8: bool = True,
) -> torch.Tensor:
    """uint8 ``[H, W, 3]`` / ``[B, H, W, 3]`` -> float32 ``[B, 3, size, size]``, ``x / 255 * 2 - 1``.

    Resizes with ``resize_with_pad`` when the image is not ``size x size``; padding becomes ``pad_value``
    (-1, black, as openpi and LeRobot >= 0.5 pad; LeRobot 0.4 padded its [0, 1] images with -1, which is -3
    here, and policies fine-tuned with it saw that). The resized image is rounded to uint8 as openpi does, or kept
    in floats (``round_to_uint8=False``) as LeRobot does. The work runs on ``device`` (default: where a tensor
    input lives, else CPU).
    """
    if size < 1:
        raise ImageError(f"size must be positive, got {size}")
    x, _ = _as_uint8_bhwc(images)
    if device is not None:
        x = x.to(device)
    height, width = x.shape[1], x.shape[2]
    x = _resize_with_pad_bhwc(x, size, size, antialias, round_to_uint8)
    out = x.permute(0, 3, 1, 2).to(torch.float32) / 255.0 * 2.0 - 1.0
    if pad_value != -1.0 and (height, width) != (size, size):
        new_h, new_w = resized_shape(height, width, size, size)
        top, left = (size - new_h) // 2, (size - new_w) // 2
        inside = torch.zeros(size, size, dtype=torch.bool, device=out.device)
        inside[top : top + new_h, left : left + new_w] = True
        out = torch.where(inside, out, torch.tensor(pad_value, dtype=out.dtype, device=out.device))
    return out
