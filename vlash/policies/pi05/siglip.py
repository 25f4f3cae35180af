"""SigLIP vision tower (ViT, pre-LN, no pooling) as used by PaliGemma / pi0.5.

Module names follow the HF/LeRobot layout (embeddings.patch_embedding, encoder.layers.N.self_attn...),
so checkpoint keys map by prefix only.
"""

from __future__ import annotations

from torch import Tensor, nn

from vlash.policies.pi05.config import SiglipConfig
from vlash.policies.pi05.layers import gelu_tanh


class SiglipAttention(nn.Module):
    def __init__(self, cfg: SiglipConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_heads
        self.q_proj = nn.Linear(cfg.width, cfg.width)
        self.k_proj = nn.Linear(cfg.width, cfg.width)
        self.v_proj = nn.Linear(cfg.width, cfg.width)
        self.out_proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x: Tensor) -> Tensor:
        batch, seq, width = x.shape
        shape = (batch, seq, self.num_heads, width // self.num_heads)
        q, k, v = (proj(x).view(shape).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj))
        out = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out_proj(out.transpose(1, 2).reshape(batch, seq, width))


class SiglipMLP(nn.Module):
    def __init__(self, cfg: SiglipConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.width, cfg.mlp_dim)
        self.fc2 = nn.Linear(cfg.mlp_dim, cfg.width)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(gelu_tanh(self.fc1(x)))


class SiglipEncoderLayer(nn.Module):
    def __init__(self, cfg: SiglipConfig) -> None:
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(cfg.width, eps=cfg.layer_norm_eps)
        self.self_attn = SiglipAttention(cfg)
        self.layer_norm2 = nn.LayerNorm(cfg.width, eps=cfg.layer_norm_eps)
        self.mlp = SiglipMLP(cfg)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class SiglipEmbeddings(nn.Module):
    def __init__(self, cfg: SiglipConfig) -> None:
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, cfg.width, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.position_embedding = nn.Embedding(cfg.num_patches, cfg.width)

    def forward(self, images: Tensor) -> Tensor:
        """images [N, 3, H, W] in [-1, 1] -> patch tokens [N, num_patches, width]; the stem runs in fp32."""
        stem = self.patch_embedding
        patches = nn.functional.conv2d(images.float(), stem.weight.float(), stem.bias.float(), stride=stem.stride)
        tokens = patches.flatten(2).transpose(1, 2) + self.position_embedding.weight.float()
        return tokens.to(stem.weight.dtype)


class SiglipEncoder(nn.Module):
    def __init__(self, cfg: SiglipConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(SiglipEncoderLayer(cfg) for _ in range(cfg.depth))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class SiglipVisionTower(nn.Module):
    """pixels [N, 3, S, S] -> tokens [N, (S/patch)^2, width] (before the projector)."""

    def __init__(self, cfg: SiglipConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = SiglipEmbeddings(cfg)
        self.encoder = SiglipEncoder(cfg)
        self.post_layernorm = nn.LayerNorm(cfg.width, eps=cfg.layer_norm_eps)

    def forward(self, images: Tensor) -> Tensor:
        size = self.config.image_size
        if images.shape[-3:] != (3, size, size):
            raise ValueError(f"vision tower expects images [N, 3, {size}, {size}], got {tuple(images.shape)}")
        return self.post_layernorm(self.encoder(self.embeddings(images)))


__all__ = ["SiglipVisionTower"]
