"""pi0.5 model configuration: dataclasses validated on construction, loaded from configs/policies/*.yaml."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from vlash.errors import ConfigError
from vlash.resources import config_dir

# configs/ sits at the repository root next to the package (editable install / source checkout).
PRESET_DIR = config_dir("policies")
TIME_EMBEDDINGS = ("fp32", "fp64")  # Pi05Config.time_embedding


def _check_positive(owner: str, **values: int | float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ConfigError(f"{owner}.{name} must be > 0, got {value!r}")


@dataclass(frozen=True)
class SiglipConfig:
    """SigLIP vision tower (So400m/14 in the full model): ViT, no pooling, no cls token."""

    width: int = 1152  # hidden size
    depth: int = 27  # encoder layers
    mlp_dim: int = 4304  # MLP hidden size
    num_heads: int = 16  # attention heads (head dim = width / num_heads)
    patch_size: int = 14  # conv stem kernel = stride
    image_size: int = 224  # square input resolution the model expects
    layer_norm_eps: float = 1e-6  # flax LayerNorm default

    def __post_init__(self) -> None:
        _check_positive(
            "vision",
            width=self.width,
            depth=self.depth,
            mlp_dim=self.mlp_dim,
            num_heads=self.num_heads,
            patch_size=self.patch_size,
            image_size=self.image_size,
        )
        if self.width % self.num_heads:
            raise ConfigError(f"vision.width {self.width} is not divisible by num_heads {self.num_heads}")
        if self.image_size % self.patch_size:
            raise ConfigError(f"vision.image_size {self.image_size} is not a multiple of patch_size {self.patch_size}")

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class GemmaConfig:
    """One Gemma decoder stack (the VLM, or the action expert)."""

    width: int  # hidden size
    depth: int  # decoder layers
    mlp_dim: int  # GeGLU hidden size
    num_heads: int = 8  # query heads
    num_kv_heads: int = 1  # key/value heads (1 = multi-query attention)
    head_dim: int = 256  # per-head size
    rms_norm_eps: float = 1e-6  # RMSNorm epsilon
    rope_base: float = 10_000.0  # RoPE timescale base

    def __post_init__(self) -> None:
        _check_positive(
            "gemma",
            width=self.width,
            depth=self.depth,
            mlp_dim=self.mlp_dim,
            num_heads=self.num_heads,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
        )
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(f"gemma.num_heads {self.num_heads} not divisible by num_kv_heads {self.num_kv_heads}")


@dataclass(frozen=True)
class Pi05Config:
    """Full pi0.5 policy: SigLIP + Gemma VLM (prefix) + Gemma action expert with adaRMS time conditioning."""

    name: str  # preset name, e.g. "pi05"
    vision: SiglipConfig  # vision tower
    vlm: GemmaConfig  # prefix decoder (PaliGemma's Gemma-2B in the full model)
    expert: GemmaConfig  # action expert (Gemma-300M-shaped in the full model)
    vocab_size: int = 257_152  # token embedding rows
    action_dim: int = 32  # padded action/state width
    action_horizon: int = 50  # chunk length H
    max_token_len: int = 200  # prompt length (right-padded)
    camera_names: tuple[str, ...] = (
        "base_0_rgb",
        "left_wrist_0_rgb",
        "right_wrist_0_rgb",
    )  # image slots, in token order
    num_steps: int = 10  # default Euler steps
    time_min_period: float = 4e-3  # sin/cos time embedding periods
    time_max_period: float = 4.0
    # precision of the sin/cos time embedding's arguments (up to 2 pi / 4e-3 = 1571 rad): "fp32" as openpi's JAX
    # model (and vlash's own policies), "fp64" as LeRobot's PyTorch model; a checkpoint gets its trainer's
    time_embedding: str = "fp32"

    def __post_init__(self) -> None:
        _check_positive(
            self.name,
            vocab_size=self.vocab_size,
            action_dim=self.action_dim,
            action_horizon=self.action_horizon,
            max_token_len=self.max_token_len,
            num_steps=self.num_steps,
        )
        if not self.camera_names:
            raise ConfigError(f"{self.name}: camera_names must name at least one camera")
        if len(set(self.camera_names)) != len(self.camera_names):
            raise ConfigError(f"{self.name}: duplicate camera names {self.camera_names}")
        shared = ("depth", "num_heads", "num_kv_heads", "head_dim")
        for attr in shared:  # joint attention needs the two stacks to line up layer by layer
            if getattr(self.vlm, attr) != getattr(self.expert, attr):
                raise ConfigError(
                    f"{self.name}: vlm.{attr}={getattr(self.vlm, attr)} must equal "
                    f"expert.{attr}={getattr(self.expert, attr)}"
                )
        if self.time_embedding not in TIME_EMBEDDINGS:
            got = self.time_embedding
            raise ConfigError(f"{self.name}: time_embedding must be one of {TIME_EMBEDDINGS}, got {got!r}")
        if self.expert.width % 2:
            raise ConfigError(f"{self.name}: expert.width {self.expert.width} must be even (sin/cos time embedding)")

    @property
    def num_cameras(self) -> int:
        return len(self.camera_names)

    @property
    def prefix_len(self) -> int:
        return self.num_cameras * self.vision.num_patches + self.max_token_len

    def with_overrides(self, **changes: Any) -> Pi05Config:
        """A copy with top-level fields replaced (e.g. camera_names for a 1-camera benchmark)."""
        return _from_dict({**self.to_dict(), **changes})

    def with_cameras(self, count: int) -> Pi05Config:
        """A copy with `count` camera slots: the first of this config's names, then extra_<i>_rgb."""
        if count < 1:
            raise ConfigError(f"{self.name}: camera count must be >= 1, got {count}")
        names = list(self.camera_names) + [f"extra_{i}_rgb" for i in range(count)]
        return self.with_overrides(camera_names=names[:count])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["camera_names"] = list(self.camera_names)
        return out


def _from_dict(data: dict[str, Any]) -> Pi05Config:
    data = dict(data)
    known = {f.name for f in fields(Pi05Config)}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"unknown pi05 config keys: {sorted(unknown)}")
    try:
        data["vision"] = SiglipConfig(**data.get("vision", {}))
        data["vlm"] = GemmaConfig(**data["vlm"])
        data["expert"] = GemmaConfig(**data["expert"])
    except TypeError as exc:
        raise ConfigError(f"bad pi05 config: {exc}") from exc
    except KeyError as exc:
        raise ConfigError(f"pi05 config lacks section {exc}") from exc
    if "camera_names" in data:
        data["camera_names"] = tuple(data["camera_names"])
    return Pi05Config(**data)


def config_from_dict(data: dict[str, Any]) -> Pi05Config:
    """Build a validated config from a plain dict (YAML / JSON content)."""
    return _from_dict(data)


def available_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name_or_path: str | Path) -> Pi05Config:
    """Load `configs/policies/<name>.yaml`, or a YAML file given by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PRESET_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ConfigError(f"no policy config {str(name_or_path)!r}; presets: {', '.join(available_presets())}")
    with path.open() as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at top level")
    data.setdefault("name", path.stem)
    return _from_dict(data)


__all__ = ["GemmaConfig", "Pi05Config", "SiglipConfig", "available_presets", "config_from_dict", "load_preset"]
