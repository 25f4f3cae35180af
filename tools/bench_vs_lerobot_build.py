"""LeRobot 0.6.1's pi0.5 at chosen sizes, with random weights, written by LeRobot's own save code (for
tools/bench_vs_lerobot.py). Needs `pip install "lerobot[pi]==0.6.1"` (Python 3.12, .ci/lerobot_lane.sh's venv).

LeRobot hard-codes pi0.5's sizes; the patches are those of tests/fixtures/lerobot_pi05_tiny (its reference.meta.json
lists them), with the sizes as arguments: `modeling_pi05.get_gemma_config` is replaced, and the HF configs that
`PaliGemmaWithExpertModel.__init__` builds are edited before `PaliGemmaForConditionalGenerationWithPiGemma` and
`PiGemmaForCausalLM` construct (vocabulary, SigLIP width / depth / mlp / heads / patch, projector width). No other
LeRobot code changes. The vocabulary is the tiny tokenizer's 421 (examples/lerobot_pi05_tiny/tokenizer): an
embedding lookup costs the same whatever the table's rows, so it leaves the compute of a chunk unchanged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "examples" / "lerobot_pi05_tiny" / "tokenizer"
VOCAB = 421  # the tiny tokenizer's length (420 sentencepiece pieces + transformers' <mask>)
STATE_DIMS = ACTION_DIMS = 6  # an SO-101: 5 joints + gripper
PALIGEMMA_REPO = "models--google--paligemma-3b-pt-224"  # the tokenizer LeRobot's TokenizerProcessorStep names


@dataclass(frozen=True)
class Sizes:
    """One pi0.5 shape: SigLIP, the VLM (LeRobot's gemma_2b slot) and the action expert (gemma_300m)."""

    vision: tuple[int, int, int, int, int]  # width, depth, mlp_dim, num_heads, patch_size
    vlm: tuple[int, int, int, int, int, int]  # width, depth, mlp_dim, num_heads, num_kv_heads, head_dim
    expert: tuple[int, int, int, int, int, int]  # the same fields; depth / heads / head_dim equal the VLM's

    def vlash_dict(self) -> dict:
        """The sizes as vlash's --model-config takes them (Pi05Config's vision / vlm / expert / vocab_size)."""
        gemma = ("width", "depth", "mlp_dim", "num_heads", "num_kv_heads", "head_dim")
        vision = dict(zip(("width", "depth", "mlp_dim", "num_heads", "patch_size"), self.vision, strict=True))
        return {
            "name": "pi05-bench-lerobot",
            "vision": vision | {"image_size": 224},
            "vlm": dict(zip(gemma, self.vlm, strict=True)),
            "expert": dict(zip(gemma, self.expert, strict=True)),
            "vocab_size": VOCAB,
        }


def real_widths(depth: int, vision_depth: int) -> Sizes:
    """pi0.5's own widths (So400m/14 SigLIP, Gemma 2B, the 300M expert) at `depth` / `vision_depth` layers."""
    return Sizes((1152, vision_depth, 4304, 16, 14), (2048, depth, 16384, 8, 1, 256), (1024, depth, 4096, 8, 1, 256))


TINY = Sizes((32, 2, 64, 2, 16), (64, 2, 128, 4, 1, 16), (32, 2, 64, 4, 1, 16))  # the tiny fixture's (--smoke)


def patch_lerobot_sizes(sizes: Sizes) -> None:
    """Point LeRobot's pi0.5 at `sizes` (module attributes read when PI05Policy is built). One size per process."""
    import lerobot.policies.pi05.modeling_pi05 as m

    gemmas = {"gemma_2b": sizes.vlm, "gemma_300m": sizes.expert}
    m.get_gemma_config = lambda variant: m.GemmaConfig(*gemmas[variant])
    paligemma, expert = m.PaliGemmaForConditionalGenerationWithPiGemma, m.PiGemmaForCausalLM
    width, depth, mlp, heads, patch = sizes.vision

    def sized_paligemma(config):
        config._vocab_size = config.text_config.vocab_size = config.image_token_index = VOCAB
        vision = config.vision_config
        vision.hidden_size, vision.num_hidden_layers, vision.intermediate_size = width, depth, mlp
        vision.num_attention_heads, vision.patch_size = heads, patch
        vision.projection_dim = config.projection_dim = sizes.vlm[0]
        config.text_config.num_image_tokens = (vision.image_size // patch) ** 2
        return paligemma(config=config)

    def sized_expert(config):
        config.vocab_size = VOCAB
        return expert(config=config)

    m.PaliGemmaForConditionalGenerationWithPiGemma, m.PiGemmaForCausalLM = sized_paligemma, sized_expert


def serve_tokenizer_offline(cache: Path) -> None:
    """An offline hub-cache entry for google/paligemma-3b-pt-224 holding the tiny tokenizer (LeRobot's
    TokenizerProcessorStep loads that name); sets HF_HUB_CACHE and the offline switches for this process."""
    commit = hashlib.sha1(b"tiny").hexdigest()
    snapshot = cache / PALIGEMMA_REPO / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"):
        shutil.copy(TOKENIZER / name, snapshot / name)
    (snapshot / "config.json").write_text('{"model_type": "paligemma"}')  # AutoTokenizer reads it
    (cache / PALIGEMMA_REPO / "refs").mkdir()
    (cache / PALIGEMMA_REPO / "refs" / "main").write_text(commit)
    os.environ.update(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def lerobot_config(cameras: int, horizon: int, prompt_len: int, steps: int):
    """PI05Config for an SO-101-like robot: `cameras` 224x224 cameras, state and action 6, quantile norms, fp32 (a
    side loads it at its own dtype)."""
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.pi05.configuration_pi05 import PI05Config

    inputs = {f"observation.images.cam{i}": PolicyFeature(FeatureType.VISUAL, (3, 224, 224)) for i in range(cameras)}
    inputs["observation.state"] = PolicyFeature(FeatureType.STATE, (STATE_DIMS,))
    return PI05Config(
        input_features=inputs,
        output_features={"action": PolicyFeature(FeatureType.ACTION, (ACTION_DIMS,))},
        chunk_size=horizon,
        n_action_steps=horizon,
        tokenizer_max_length=prompt_len,
        num_inference_steps=steps,
        dtype="float32",
        device="cpu",
    )


@torch.no_grad()
def rerandomize(policy: torch.nn.Module, seed: int) -> None:
    """The tiny fixture's rule, so that every weight matters at O(1) scale: every >= 2-D parameter N(0, 1) /
    sqrt(fan_in) (x 0.5 for the expert's adaRMS `.dense.` layers), every 1-D one + 0.1 N(0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in policy.named_parameters():
        if p.ndim >= 2:
            fan_in = p[0].numel()
            scale = (0.5 if ".dense." in name else 1.0) / fan_in**0.5
            p.copy_(torch.randn(p.shape, generator=gen) * scale)
        else:
            p.add_(0.1 * torch.randn(p.shape, generator=gen))


def made_up_stats(seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Normalization statistics for state and action (every field LeRobot's normalizer may read)."""
    rng = np.random.default_rng(seed)
    stats = {}
    for key, dims in (("observation.state", STATE_DIMS), ("action", ACTION_DIMS)):
        low, span = rng.uniform(-100, 0, dims), rng.uniform(50, 200, dims)
        q = {f"q{p:02d}": low + span * p / 100 for p in (1, 10, 50, 90, 99)}
        extra = {"mean": low + span / 2, "std": span / 4, "min": low - 5, "max": low + span + 5}
        stats[key] = {k: v.astype(np.float32) for k, v in (q | extra).items()} | {"count": np.array([1000])}
    return stats


def build_checkpoint(out: Path, sizes: Sizes, config, seed: int) -> int:
    """A LeRobot pi0.5 checkpoint at `sizes` in `out`, written by PI05Policy.save_pretrained and the processor
    pipelines' save_pretrained: exactly the files LeRobot 0.6.1 writes (no tokenizer: 0.6.1 saves none). Returns
    the parameter count."""
    from lerobot.policies.pi05.modeling_pi05 import PI05Policy
    from lerobot.policies.pi05.processor_pi05 import make_pi05_pre_post_processors

    patch_lerobot_sizes(sizes)
    torch.manual_seed(seed)
    policy = PI05Policy(config)
    rerandomize(policy, seed + 1)
    policy.save_pretrained(out)
    params = sum(p.numel() for p in policy.parameters())
    del policy  # its memory back before the two sides load the checkpoint
    stats = {k: {s: torch.from_numpy(v) for s, v in d.items()} for k, d in made_up_stats(seed + 2).items()}
    pre, post = make_pi05_pre_post_processors(config, dataset_stats=stats)
    pre.save_pretrained(out)
    post.save_pretrained(out)
    return params
