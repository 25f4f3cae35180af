"""A word-level tokenizer.json for the simulated tasks' prompts (the tiny policies' 1024-id vocabulary).

Every piece of the pi0.5 prompt `Pi05PromptEncoder.format_prompt` writes is a known token:
    "Task: {instruction}, State: {bins};\\nAction: "
splits on whitespace and isolates the punctuation , ; : . ! ? — so the scaffolding words ("Task",
"State", "Action"), the punctuation, every state bin "0".."255" (and "-1", the bin openpi gives
values below -1) and every word of the instructions are whole tokens. Specials in Gemma's order:
<pad> = 0, <eos> = 1, <bos> = 2, <unk> = 3 (PromptTokenizer finds BOS as "<bos>"). Ids are assigned
in a fixed order (specials, bins, punctuation, scaffolding, sorted instruction words), so the file is
a pure function of the instruction set.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from vlash.policies.processing.tokenizer import TokenizerError, clean_prompt

SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>")  # Gemma's order: pad 0, eos 1, bos 2, unk 3
STATE_BINS = tuple(str(i) for i in range(-1, 256))  # discretize_state gives -1..255
PUNCTUATION = (",", ";", ":", ".", "!", "?")
SCAFFOLDING = ("Task", "State", "Action")
SPLIT_PATTERN = r"[,;:.!?]"  # isolated after the whitespace split


def _words(text: str) -> list[str]:
    """The words the pre-tokenizer produces from `text` (mirrors the tokenizer.json pipeline)."""
    return [w for piece in text.split() for w in re.split(f"({SPLIT_PATTERN})", piece) if w]


def instruction_words(instructions: Iterable[str]) -> set[str]:
    """Every word the tokenizer sees in `instructions` (cleaned as the prompt encoder cleans them)."""
    return {w for text in instructions for w in _words(clean_prompt(text))}


def build_vocab(instructions: Iterable[str]) -> dict[str, int]:
    """token -> id for the given instructions (cleaned as the prompt encoder cleans them)."""
    fixed = [*SPECIALS, *STATE_BINS, *PUNCTUATION, *SCAFFOLDING]
    words = sorted(instruction_words(instructions) - set(fixed))
    return {token: i for i, token in enumerate([*fixed, *words])}


def train_tokenizer(instructions: Iterable[str], path: str | os.PathLike[str], max_vocab: int = 1024) -> Path:
    """Write a tokenizer.json covering `instructions` to `path` (a file or a directory); returns the file."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors  # extra: server

    vocab = build_vocab(instructions)
    if len(vocab) > max_vocab:
        raise TokenizerError(
            f"the instructions need {len(vocab)} tokens, more than the policy's vocabulary of {max_vocab}"
        )
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated")]
    )
    tok.add_special_tokens(list(SPECIALS))
    # Like Gemma's tokenizer.json: <bos> in front when special tokens are requested (vlash adds it itself).
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    target = Path(path)
    if target.suffix != ".json":
        target = target / "tokenizer.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        tok.save(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
