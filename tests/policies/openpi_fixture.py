"""Loads the openpi pi0.5 reference fixture into vlash objects (shared by the parity tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from tests.conftest import FIXTURES
from vlash.policies.formats.openpi_jax_params import convert_openpi_params
from vlash.policies.pi05.config import Pi05Config, config_from_dict
from vlash.policies.pi05.model import Pi05Inputs, Pi05Model

NPZ = FIXTURES / "openpi_pi05_dummy" / "reference.npz"
EMBED = "params_sparse/PaliGemma/llm/embedder/input_embedding/"


@dataclass
class OpenpiReference:
    arrays: dict[str, np.ndarray]
    config: Pi05Config
    params: dict[str, np.ndarray]

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def inputs(self) -> Pi05Inputs:
        cams = self.config.camera_names
        images = np.stack([self[f"inputs/image/{c}"] for c in cams], axis=1)  # [B, C, H, W, 3]
        return Pi05Inputs(
            images=torch.from_numpy(images).permute(0, 1, 4, 2, 3),
            image_masks=torch.from_numpy(np.stack([self[f"inputs/image_mask/{c}"] for c in cams], axis=1)),
            tokens=torch.from_numpy(self["inputs/tokenized_prompt"]).long(),
            token_masks=torch.from_numpy(self["inputs/tokenized_prompt_mask"]),
        )

    def model(self) -> Pi05Model:
        model = Pi05Model(self.config)
        model.load_state_dict(convert_openpi_params(self.params, self.config), strict=True)
        return model.eval()


@cache
def load_reference() -> OpenpiReference:
    with np.load(NPZ) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta_json"]))
    sig = meta["siglip"]
    config = config_from_dict(
        {
            "name": "openpi-dummy",
            "vision": {
                "width": sig["width"],
                "depth": sig["depth"],
                "mlp_dim": sig["mlp_dim"],
                "num_heads": sig["num_heads"],
                "patch_size": sig["patch_size"][0],
                "image_size": meta["image_resolution"][0],
            },
            "vlm": meta["paligemma_gemma_config"],
            "expert": meta["action_expert_gemma_config"],
            "vocab_size": meta["vocab_size"],
            "action_dim": meta["pi0_config"]["action_dim"],
            "action_horizon": meta["pi0_config"]["action_horizon"],
            "max_token_len": meta["pi0_config"]["max_token_len"],
            "camera_names": meta["image_keys_in_order"],
            "num_steps": meta["num_steps"],
        }
    )
    params = {k.removeprefix("params/"): v for k, v in arrays.items() if k.startswith("params/")}
    table = np.zeros(tuple(arrays[EMBED + "shape"]), dtype=np.float32)
    table[arrays[EMBED + "ids"]] = arrays[EMBED + "rows"]
    params["PaliGemma/llm/embedder/input_embedding"] = table
    return OpenpiReference(arrays=arrays, config=config, params=params)
