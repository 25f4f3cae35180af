"""Gemma decoder layers for the two pi0.5 stacks (VLM: plain RMSNorm; action expert: adaRMS).

A layer is split in two halves so the model can run joint attention across the stacks:
`project_qkv` (pre-norm, q/k/v, RoPE) and `finish` (output projection, gated residual, FFN).
Module names follow the HF/LeRobot layout (self_attn.q_proj, mlp.gate_proj, input_layernorm, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from vlash.policies.pi05.config import GemmaConfig
from vlash.policies.pi05.layers import AdaRMSNorm, RMSNorm, apply_rope, gelu_tanh


class GemmaAttentionProjections(nn.Module):
    def __init__(self, cfg: GemmaConfig) -> None:
        super().__init__()
        inner, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.q_proj = nn.Linear(cfg.width, inner, bias=False)
        self.k_proj = nn.Linear(cfg.width, kv, bias=False)
        self.v_proj = nn.Linear(cfg.width, kv, bias=False)
        self.o_proj = nn.Linear(inner, cfg.width, bias=False)


class GemmaMLP(nn.Module):
    """GeGLU: down(gelu_tanh(gate(x)) * up(x))."""

    def __init__(self, cfg: GemmaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.width, cfg.mlp_dim, bias=False)
        self.up_proj = nn.Linear(cfg.width, cfg.mlp_dim, bias=False)
        self.down_proj = nn.Linear(cfg.mlp_dim, cfg.width, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(gelu_tanh(self.gate_proj(x)) * self.up_proj(x))


@dataclass
class LayerQKV:
    """Per-layer projections: q [B, N, S, hd] (RoPE'd, scaled; None when not asked for), k/v [B, K, S, hd]
    (k RoPE'd)."""

    q: Tensor | None
    k: Tensor
    v: Tensor
    attn_gate: Tensor | None  # adaRMS gate of the attention branch (expert only)


class GemmaLayer(nn.Module):
    def __init__(self, cfg: GemmaConfig, cond_dim: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.adaptive = cond_dim is not None
        if self.adaptive:
            self.input_layernorm = AdaRMSNorm(cfg.width, cond_dim, cfg.rms_norm_eps)
            self.post_attention_layernorm = AdaRMSNorm(cfg.width, cond_dim, cfg.rms_norm_eps)
        else:
            self.input_layernorm = RMSNorm(cfg.width, cfg.rms_norm_eps)
            self.post_attention_layernorm = RMSNorm(cfg.width, cfg.rms_norm_eps)
        self.self_attn = GemmaAttentionProjections(cfg)
        self.mlp = GemmaMLP(cfg)

    def _norm(self, norm: nn.Module, x: Tensor, cond: Tensor | None) -> tuple[Tensor, Tensor | None]:
        if self.adaptive:
            return norm(x, cond)
        return norm(x), None

    def project_qkv(
        self, x: Tensor, cos: Tensor, sin: Tensor, cond: Tensor | None = None, queries: bool = True
    ) -> LayerQKV:
        """Pre-norm, then q/k/v with RoPE. `queries=False` skips q (None): for tokens whose output nobody reads,
        the VLM's last layer, whose keys and values are all the action expert takes from it."""
        cfg, attn = self.cfg, self.self_attn
        batch, seq, _ = x.shape
        h, gate = self._norm(self.input_layernorm, x, cond)
        k = attn.k_proj(h).view(batch, seq, cfg.num_kv_heads, cfg.head_dim).transpose(1, 2)
        v = attn.v_proj(h).view(batch, seq, cfg.num_kv_heads, cfg.head_dim).transpose(1, 2)
        q = None
        if queries:
            q = attn.q_proj(h).view(batch, seq, cfg.num_heads, cfg.head_dim).transpose(1, 2)
            q = apply_rope(q, cos, sin) * cfg.head_dim**-0.5  # openpi scales q after RoPE
        return LayerQKV(q=q, k=apply_rope(k, cos, sin), v=v, attn_gate=gate)

    def finish(self, x: Tensor, attn_out: Tensor, qkv: LayerQKV, cond: Tensor | None = None) -> Tensor:
        """Residual update after attention: x + o(attn)·gate, then x + mlp(norm(x))·gate."""
        x = _residual(x, self.self_attn.o_proj(attn_out), qkv.attn_gate)
        h, gate = self._norm(self.post_attention_layernorm, x, cond)
        return _residual(x, self.mlp(h), gate)


def _residual(x: Tensor, y: Tensor, gate: Tensor | None) -> Tensor:
    return x + y if gate is None else x + y * gate


class GemmaStack(nn.Module):
    """Layers + final norm of one stack; the VLM also owns the token embedding."""

    def __init__(self, cfg: GemmaConfig, vocab_size: int | None = None, cond_dim: int | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        if vocab_size is not None:
            self.embed_tokens = nn.Embedding(vocab_size, cfg.width)
        self.layers = nn.ModuleList(GemmaLayer(cfg, cond_dim) for _ in range(cfg.depth))
        self.norm = (
            AdaRMSNorm(cfg.width, cond_dim, cfg.rms_norm_eps) if cond_dim else RMSNorm(cfg.width, cfg.rms_norm_eps)
        )

    def final_norm(self, x: Tensor, cond: Tensor | None = None) -> Tensor:
        if cond is None:
            return self.norm(x)
        return self.norm(x, cond)[0]  # the final adaRMS gate is unused (openpi drops it)
