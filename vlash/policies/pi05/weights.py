"""Load pi0.5 weights from LeRobot, openpi-PyTorch and vlash safetensors files by key mapping.

Layouts (detected from the keys):
  lerobot         "model.paligemma_with_expert.paligemma.model.language_model.layers.0..." (LeRobot 0.4.x)
  openpi-pytorch  the same names without the leading "model." (openpi's PyTorch conversion)
  vlash           our own module names ("vlm.layers.0...")
The model is built on the meta device and the tensors (memory-mapped by safetensors) are assigned,
so a 3.3B checkpoint never exists twice in memory. The two lm_head tensors of LeRobot checkpoints
(unused by an action policy; Gemma ties the VLM's to the embedding) are not loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from vlash.atomic import atomic_save
from vlash.errors import CheckpointError
from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.dtypes import DTYPE_NAMES
from vlash.policies.pi05.layers import RMSNorm
from vlash.policies.pi05.model import Pi05Model

log = logging.getLogger(__name__)

_PWE = "paligemma_with_expert."
# (prefix in openpi-pytorch layout, prefix in vlash layout); LeRobot adds "model." in front.
PREFIX_MAP: tuple[tuple[str, str], ...] = (
    (_PWE + "paligemma.model.vision_tower.vision_model.", "vision."),
    (_PWE + "paligemma.model.multi_modal_projector.linear.", "projector."),
    (_PWE + "paligemma.model.language_model.", "vlm."),
    (_PWE + "gemma_expert.model.", "expert."),
    ("action_in_proj.", "action_in_proj."),
    ("action_out_proj.", "action_out_proj."),
    ("time_mlp_in.", "time_mlp_in."),
    ("time_mlp_out.", "time_mlp_out."),
)
UNUSED_KEYS = (_PWE + "paligemma.lm_head.weight", _PWE + "gemma_expert.lm_head.weight")
TIED_EMBEDDING = (_PWE + "paligemma.lm_head.weight", "vlm.embed_tokens.weight")
LAYOUTS = ("lerobot", "openpi-pytorch", "vlash")
DTYPES = {name: getattr(torch, dtype) for name, dtype in DTYPE_NAMES.items()}


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise CheckpointError(f"unknown dtype {dtype!r}; choose one of {sorted(DTYPES)}")
    return DTYPES[dtype]


def detect_layout(keys: Iterable[str]) -> str:
    keys = list(keys)
    if any(k.startswith("model." + _PWE) for k in keys):
        return "lerobot"
    if any(k.startswith(_PWE) for k in keys):
        return "openpi-pytorch"
    if any(k.startswith(("vlm.", "expert.", "vision.")) for k in keys):
        return "vlash"
    raise CheckpointError(f"unrecognised checkpoint layout; first keys: {keys[:5]}")


def to_vlash_key(key: str, layout: str) -> str | None:
    """Our name for a checkpoint key; None for tensors we deliberately skip (lm_head)."""
    if layout == "vlash":
        return key
    name = key.removeprefix("model.") if layout == "lerobot" else key
    if name in UNUSED_KEYS:
        return None
    for theirs, ours in PREFIX_MAP:
        if name.startswith(theirs):
            return ours + name[len(theirs) :]
    return key  # reported as unexpected by the caller


def from_vlash_key(key: str, layout: str) -> str:
    """Inverse mapping, to write a state dict in a foreign layout (tests, export)."""
    if layout not in LAYOUTS:
        raise CheckpointError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    if layout == "vlash":
        return key
    for theirs, ours in PREFIX_MAP:
        if key.startswith(ours):
            name = theirs + key[len(ours) :]
            return "model." + name if layout == "lerobot" else name
    raise CheckpointError(f"no {layout} name for {key!r}")


def export_state_dict(model: Pi05Model, layout: str = "vlash") -> dict[str, torch.Tensor]:
    return {from_vlash_key(k, layout): v.detach().contiguous() for k, v in model.state_dict().items()}


def save_weights(model: Pi05Model, path: str | Path, layout: str = "vlash") -> None:
    """Write model.safetensors atomically (temp file + rename) in the given layout, with an ordinary file's mode
    (save_file alone makes it 0600: unreadable to the user who serves it)."""
    tensors = export_state_dict(model, layout)
    atomic_save(path, lambda tmp: save_file(tensors, tmp, metadata={"format": "pt", "layout": layout}))


SIZE_HINT = (
    "its tensors have other shapes than {model}'s: give the model's sizes, `--model-config PRESET|YAML` for a LeRobot "
    "or openpi checkpoint (e.g. pi05-tiny; default: pi0.5's full size), or the preset it was made from"
)


def _mismatch_report(missing: list[str], unexpected: list[str], shapes: list[str], path: Path, model: str) -> str:
    def listing(title: str, items: list[str]) -> str:
        shown = "\n    ".join(items[:20])
        more = f"\n    ... and {len(items) - 20} more" if len(items) > 20 else ""
        return f"\n  {title} ({len(items)}):\n    {shown}{more}" if items else ""

    hint = f"; {SIZE_HINT.format(model=model)}" if shapes else ""
    return (
        f"checkpoint {path} does not fit the model{hint}:"
        + listing("missing keys", missing)
        + listing("unexpected keys", unexpected)
        + listing("shape mismatches", shapes)
    )


def map_state_dict(
    tensors: Mapping[str, torch.Tensor], model: Pi05Model, path: Path, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """Checkpoint tensors -> our names and dtype, with every problem reported at once."""
    layout = detect_layout(tensors.keys())
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    mapped: dict[str, torch.Tensor] = {}
    unexpected, shapes = [], []
    for key, tensor in tensors.items():
        ours = to_vlash_key(key, layout)
        if ours is None:
            continue
        if ours not in expected:
            unexpected.append(key)
        elif tuple(tensor.shape) != expected[ours]:
            shapes.append(f"{key}: checkpoint {tuple(tensor.shape)} vs model {expected[ours]}")
        else:
            mapped[ours] = tensor
    tied_src, tied_dst = TIED_EMBEDDING
    tied_key = ("model." + tied_src) if layout == "lerobot" else tied_src
    if tied_dst not in mapped and tied_key in tensors:  # Gemma ties lm_head to the embedding
        mapped[tied_dst] = tensors[tied_key]
    missing = sorted(set(expected) - set(mapped))
    if missing or unexpected or shapes:
        raise CheckpointError(_mismatch_report(missing, sorted(unexpected), shapes, path, model.config.name))
    return {k: v.to(dtype) for k, v in mapped.items()}


def read_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a safetensors file, memory-mapped; corrupt files raise CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no weights file at {path}")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a dict)
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc


def safetensors_keys(path: str | Path) -> tuple[list[str], dict[str, str]]:
    """(tensor names, header metadata) of a safetensors file, without reading the tensors."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no weights file at {path}")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            return list(f.keys()), dict(f.metadata() or {})
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc


ALIGNMENT = 64  # bytes: a cache line, the widest SIMD load (AVX-512), and what torch's CPU allocator gives


def aligned_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` with every tensor whose data does not start on an `ALIGNMENT` boundary copied to a fresh allocation
    (tensors sharing storage stay shared). A safetensors file's tensors sit at arbitrary offsets of its buffer, and
    the CPU GEMM kernels choose their code path, and so their rounding, by alignment: the same weights loaded from
    two files gave actions 4.8e-7 apart. Aligned weights also take the fast SIMD loads."""
    copies: dict[tuple, torch.Tensor] = {}
    out = {}
    for name, tensor in state.items():
        if tensor.data_ptr() % ALIGNMENT:
            key = (tensor.data_ptr(), tuple(tensor.shape), tensor.stride(), tensor.dtype)
            tensor = copies.setdefault(key, tensor.clone())
        out[name] = tensor
    return out


def load_model(
    config: Pi05Config, weights: str | Path, dtype: str | torch.dtype = "fp32", device: str | torch.device = "cpu"
) -> Pi05Model:
    """Build pi05 on the meta device and assign the (mapped, cast) checkpoint tensors."""
    torch_dtype = resolve_dtype(dtype)
    path = Path(weights)
    with torch.device("meta"):
        model = Pi05Model(config)
    state = map_state_dict(read_safetensors(path), model, path, torch_dtype)
    model.load_state_dict(aligned_state(state), strict=True, assign=True)
    log.info("loaded %s (%d tensors) as %s", path, len(state), torch_dtype)
    return model.to(device).eval()


def build_random(
    config: Pi05Config, dtype: str | torch.dtype = "fp32", device: str | torch.device = "cpu", seed: int = 0
) -> Pi05Model:
    """A randomly initialised model (benchmarks, tests). Zero-initialised norms get small noise so every
    parameter influences the output."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Pi05Model(config)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, RMSNorm):  # (1 + w) scaling: zero init would hide the weight
                module.weight.normal_(0.0, 0.05)
    return model.to(resolve_dtype(dtype)).eval()
