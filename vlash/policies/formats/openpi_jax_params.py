"""Convert an openpi (JAX/flax) pi0.5 parameter tree into vlash's state dict.

Input: a flat mapping of openpi's nnx state paths joined with "/" (e.g.
"PaliGemma/llm/layers/attn/q_einsum/w") to arrays, as produced by flattening openpi's params
(the layout of openpi's own checkpoints). Layers are stacked on axis 0 (nn.scan); the action
expert's tensors carry the suffix "_1". Einsum kernels are reshaped/transposed to nn.Linear layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from vlash.errors import CheckpointError
from vlash.policies.pi05.config import Pi05Config

Array = np.ndarray
IMG, LLM = "PaliGemma/img", "PaliGemma/llm"
ENC = f"{IMG}/Transformer/encoderblock"


def _linear(kernel: Array) -> Array:  # flax Dense kernel [in, out] -> torch weight [out, in]
    return kernel.T


def _heads_in(w: Array) -> Array:  # [heads, D, hd] -> [heads*hd, D]
    return w.transpose(0, 2, 1).reshape(-1, w.shape[1])


def _siglip_layer_rules() -> dict[str, tuple[str, Callable[[Array], Array]]]:
    attn = f"{ENC}/MultiHeadDotProductAttention_0"
    flat_in = lambda k: k.reshape(k.shape[0], -1).T  # [D, heads, hd] -> [heads*hd, D]  # noqa: E731
    rules = {
        "layer_norm1.weight": (f"{ENC}/LayerNorm_0/scale", lambda a: a),
        "layer_norm1.bias": (f"{ENC}/LayerNorm_0/bias", lambda a: a),
        "layer_norm2.weight": (f"{ENC}/LayerNorm_1/scale", lambda a: a),
        "layer_norm2.bias": (f"{ENC}/LayerNorm_1/bias", lambda a: a),
        "mlp.fc1.weight": (f"{ENC}/MlpBlock_0/Dense_0/kernel", _linear),
        "mlp.fc1.bias": (f"{ENC}/MlpBlock_0/Dense_0/bias", lambda a: a),
        "mlp.fc2.weight": (f"{ENC}/MlpBlock_0/Dense_1/kernel", _linear),
        "mlp.fc2.bias": (f"{ENC}/MlpBlock_0/Dense_1/bias", lambda a: a),
        "self_attn.out_proj.weight": (f"{attn}/out/kernel", lambda k: k.reshape(-1, k.shape[-1]).T),
        "self_attn.out_proj.bias": (f"{attn}/out/bias", lambda a: a),
    }
    for ours, theirs in (("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value")):
        rules[f"self_attn.{ours}.weight"] = (f"{attn}/{theirs}/kernel", flat_in)
        rules[f"self_attn.{ours}.bias"] = (f"{attn}/{theirs}/bias", lambda b: b.reshape(-1))
    return rules


def _gemma_layer_rules(sfx: str, adaptive: bool) -> dict[str, tuple[str, Callable[[Array], Array]]]:
    layers = f"{LLM}/layers"
    rules = {
        "self_attn.q_proj.weight": (f"{layers}/attn/q_einsum{sfx}/w", _heads_in),
        "self_attn.k_proj.weight": (f"{layers}/attn/kv_einsum{sfx}/w", lambda w: _heads_in(w[0])),
        "self_attn.v_proj.weight": (f"{layers}/attn/kv_einsum{sfx}/w", lambda w: _heads_in(w[1])),
        "self_attn.o_proj.weight": (f"{layers}/attn/attn_vec_einsum{sfx}/w", lambda w: w.reshape(-1, w.shape[-1]).T),
        "mlp.gate_proj.weight": (f"{layers}/mlp{sfx}/gating_einsum", lambda w: w[0].T),
        "mlp.up_proj.weight": (f"{layers}/mlp{sfx}/gating_einsum", lambda w: w[1].T),
        "mlp.down_proj.weight": (f"{layers}/mlp{sfx}/linear", lambda w: w.T),
    }
    for ours, theirs in (("input_layernorm", "pre_attention_norm"), ("post_attention_layernorm", "pre_ffw_norm")):
        if adaptive:
            rules[f"{ours}.dense.weight"] = (f"{layers}/{theirs}{sfx}/Dense_0/kernel", _linear)
            rules[f"{ours}.dense.bias"] = (f"{layers}/{theirs}{sfx}/Dense_0/bias", lambda a: a)
        else:
            rules[f"{ours}.weight"] = (f"{layers}/{theirs}{sfx}/scale", lambda a: a)
    return rules


def _global_rules() -> dict[str, tuple[str, Callable[[Array], Array]]]:
    ident = lambda a: a  # noqa: E731
    rules = {
        "vision.embeddings.patch_embedding.weight": (f"{IMG}/embedding/kernel", lambda k: k.transpose(3, 2, 0, 1)),
        "vision.embeddings.patch_embedding.bias": (f"{IMG}/embedding/bias", ident),
        "vision.embeddings.position_embedding.weight": (f"{IMG}/pos_embedding", lambda p: p.reshape(-1, p.shape[-1])),
        "vision.post_layernorm.weight": (f"{IMG}/Transformer/encoder_norm/scale", ident),
        "vision.post_layernorm.bias": (f"{IMG}/Transformer/encoder_norm/bias", ident),
        "projector.weight": (f"{IMG}/head/kernel", _linear),
        "projector.bias": (f"{IMG}/head/bias", ident),
        "vlm.embed_tokens.weight": (f"{LLM}/embedder/input_embedding", ident),
        "vlm.norm.weight": (f"{LLM}/final_norm/scale", ident),
        "expert.norm.dense.weight": (f"{LLM}/final_norm_1/Dense_0/kernel", _linear),
        "expert.norm.dense.bias": (f"{LLM}/final_norm_1/Dense_0/bias", ident),
    }
    for name in ("action_in_proj", "action_out_proj", "time_mlp_in", "time_mlp_out"):
        rules[f"{name}.weight"] = (f"{name}/kernel", _linear)
        rules[f"{name}.bias"] = (f"{name}/bias", ident)
    return rules


def convert_openpi_params(params: Mapping[str, Array], config: Pi05Config) -> dict[str, torch.Tensor]:
    """openpi flat param dict -> vlash state dict (float32 tensors). Raises CheckpointError on missing paths."""
    used: set[str] = set()

    def take(path: str) -> Array:
        if path not in params:
            raise CheckpointError(f"openpi params lack {path!r}")
        used.add(path)
        return np.asarray(params[path], dtype=np.float32)

    out: dict[str, torch.Tensor] = {}
    for ours, (path, fn) in _global_rules().items():
        out[ours] = torch.from_numpy(np.ascontiguousarray(fn(take(path))))
    stacks = (
        ("vision.encoder.layers", _siglip_layer_rules(), config.vision.depth),
        ("vlm.layers", _gemma_layer_rules("", adaptive=False), config.vlm.depth),
        ("expert.layers", _gemma_layer_rules("_1", adaptive=True), config.expert.depth),
    )
    for prefix, rules, depth in stacks:
        for ours, (path, fn) in rules.items():
            stacked = take(path)
            if stacked.shape[0] != depth:
                raise CheckpointError(f"{path}: {stacked.shape[0]} stacked layers, config says {depth}")
            for i in range(depth):
                out[f"{prefix}.{i}.{ours}"] = torch.from_numpy(np.ascontiguousarray(fn(stacked[i])))
    unused = sorted(set(params) - used)
    if unused:
        raise CheckpointError(f"openpi params not used by pi05 (wrong model?): {unused[:8]}")
    return out
