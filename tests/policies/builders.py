"""Builders of on-disk test artifacts shared by the policy tests: tiny tokenizers trained here, LeRobot
processor files as LeRobot 0.4.x writes them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]  # Gemma's order: pad 0, eos 1, bos 2, unk 3
CORPUS = [
    "Task: pick up the red cube, State: 0 12 128 255 -1;\nAction: ",
    "Task: open the drawer and put the sponge inside, State: 3 45 67 89 101 200;\nAction: ",
    "Task: fold the towel, State: 250 251 252 253 254 9 8 7 6 5 4 3 2 1;\nAction: ",
    "stack the blocks then place the bowl on the plate",
]


def train_wordlevel_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(), pre_tokenizers.Digits(True)]
    )
    tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=SPECIALS))
    # Like Gemma's tokenizer.json: a post-processor that adds <bos> when special tokens are on.
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    tok.enable_padding(pad_id=0, pad_token="<pad>", length=64)  # must be ignored by PromptTokenizer
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path


def train_sentencepiece_tokenizer(path: Path) -> Path:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 20),
        model_writer=model,
        vocab_size=80,
        hard_vocab_limit=False,
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        character_coverage=1.0,
        minloglevel=2,
    )
    path.mkdir(parents=True, exist_ok=True)
    (path / "tokenizer.model").write_bytes(model.getvalue())
    return path


def write_lerobot_processor_files(
    d: Path, *, drop: str | None = None, post_shift: float = 0.0, only: list[str] | None = None
) -> None:
    """A LeRobot 0.4.x pi0.5 checkpoint's processor files, as PolicyProcessorPipeline.save_pretrained writes."""
    stats = {
        "observation.state": {"q01": [0.0, -1.0], "q99": [2.0, 3.0], "mean": [1.0, 1.0], "std": [1.0, 2.0]},
        "action": {"q01": [-1.0, 0.0, 5.0], "q99": [1.0, 4.0, 5.0], "mean": [0.0] * 3, "std": [1.0] * 3},
        "observation.images.base_0_rgb": {"mean": [[[0.5]], [[0.5]], [[0.5]]], "std": [[[0.2]]] * 3},
    }
    flat = {f"{k}.{s}": torch.tensor(v, dtype=torch.float32) for k, st in stats.items() for s, v in st.items()}
    flat = {k: v for k, v in flat.items() if k != drop}
    flat["action.count"] = torch.tensor([100])  # LeRobot stores an int64 count too
    features = {
        "observation.images.base_0_rgb": {"type": "VISUAL", "shape": [3, 224, 224]},
        "observation.state": {"type": "STATE", "shape": [32]},
        "action": {"type": "ACTION", "shape": [32]},
    }
    norm_map = {"VISUAL": "IDENTITY", "STATE": "QUANTILES", "ACTION": "QUANTILES"}
    norm_cfg = {"eps": 1e-8, "features": features, "norm_map": norm_map}
    if only is not None:
        norm_cfg["normalize_observation_keys"] = only
    pre_file = "policy_preprocessor_step_3_normalizer_processor.safetensors"
    post_file = "policy_postprocessor_step_0_unnormalizer_processor.safetensors"
    pre = {
        "name": "policy_preprocessor",
        "steps": [
            {"registry_name": "rename_observations_processor", "config": {"rename_map": {}}},
            {"registry_name": "to_batch_processor", "config": {}},
            {"registry_name": "relative_actions_processor", "config": {"enabled": False}},
            {"registry_name": "normalizer_processor", "config": norm_cfg, "state_file": pre_file},
            {"registry_name": "pi05_prepare_state_tokenizer_processor_step", "config": {"max_state_dim": 32}},
            {"registry_name": "tokenizer_processor", "config": {"max_length": 48}},
            {"registry_name": "device_processor", "config": {"device": "cpu"}},
        ],
    }
    post_cfg = {**norm_cfg, "features": {"action": features["action"]}}
    post = {
        "name": "policy_postprocessor",
        "steps": [
            {"registry_name": "unnormalizer_processor", "config": post_cfg, "state_file": post_file},
            {"registry_name": "device_processor", "config": {"device": "cpu"}},
        ],
    }
    (d / "policy_preprocessor.json").write_text(json.dumps(pre, indent=2))
    (d / "policy_postprocessor.json").write_text(json.dumps(post, indent=2))
    save_file(flat, str(d / pre_file))
    post_stats = {k: v for k, v in flat.items() if k.startswith("action.")}
    post_stats["action.q99"] = post_stats["action.q99"] + post_shift  # hot-swapped stats differ from pre's
    save_file(post_stats, str(d / post_file))
