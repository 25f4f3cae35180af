"""Starting a training run from another policy directory (`TrainConfig.init_from`).

pi0.5 is fine-tuned from a pretrained vision-language model. The tiny policies have none, so vlash can
make one: a grounding-only run (`--grounding-steps` equal to `--steps`) trains the vision tower and the
VLM to find the named target, with no expert and no flow loss, and writes a policy directory like any
run. A later run started from it (`--init-from DIR`) takes all of its weights and its tokenizer, so the
token ids the VLM learned stay the same, and spends its own steps on actions.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from vlash.policies.pi05.config import Pi05Config
from vlash.policies.pi05.model import Pi05Model
from vlash.policies.pi05.weights import load_model
from vlash.policies.processing.word_tokenizer import instruction_words
from vlash.train.errors import ConfigError
from vlash.train.init import tokenizer_vocab

WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"


def load_base_model(directory: str | Path, config: Pi05Config) -> Pi05Model:
    """The policy directory's model, loaded as `config` before any data is prepared: any missing, extra or
    misshapen tensor raises CheckpointError listing all of them (a base of another preset)."""
    root = Path(directory)
    missing = [name for name in (WEIGHTS_FILE, TOKENIZER_FILE) if not (root / name).is_file()]
    if missing:
        raise ConfigError(f"init_from {directory} has no {' or '.join(missing)}: not a vlash policy directory")
    return load_model(config, root / WEIGHTS_FILE)


def base_tokenizer(directory: str | Path, instructions: Iterable[str]) -> Path:
    """The base policy's tokenizer.json, after checking it has a token for every word of `instructions`."""
    path = Path(directory) / TOKENIZER_FILE
    vocab = tokenizer_vocab(path)
    unknown = sorted(instruction_words(instructions) - set(vocab))
    if unknown:
        raise ConfigError(
            f"the tokenizer of {directory} has no token for {unknown[:10]}: the base was trained on other instructions"
        )
    return path
