"""Prompt tokenization for pi0.5: local tokenizer files only, and openpi's state-in-prompt format.

The pi0.5 prompt is built exactly as openpi's ``PaligemmaTokenizer.tokenize(prompt, state)``
(openpi src/openpi/models/tokenizer.py) and LeRobot's ``Pi05PrepareStateTokenizerProcessorStep``
(lerobot src/lerobot/policies/pi05/processor_pi05.py)::

    Task: {cleaned prompt}, State: {256-bin state ids joined by spaces};\\nAction:

tokenized with a leading BOS, right-padded with id 0 (mask False), truncated to ``max_len``. Both
references discretize the *normalized, unpadded* state (normalization runs before padding to 32 dims),
so pass the real state, or set ``Pi05PromptEncoder.state_dims`` to the real dimension count. Two variants
exist in released checkpoints:

- LeRobot 0.4.x pads the normalized state with zeros to 32 entries before binning (every padded entry is
  bin 128): ``pad_state_to=32``.
- openpi configs with ``discrete_state_input=False`` (e.g. ``pi05_libero``) leave the state out:
  ``state_in_prompt=False`` gives ``BOS + encode(prompt) + encode("\n")`` as openpi's tokenizer does.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sentencepiece
import torch
from tokenizers import Tokenizer

from vlash.errors import VlashError
from vlash.policies.processing.tokenizer_files import SENTENCEPIECE_MODEL, TOKENIZER_JSON

log = logging.getLogger(__name__)

# Tried in order when a tokenizer.json's BOS is not given and tokenizer_config.json does not name one.
BOS_CANDIDATES = ("<bos>", "<s>")
# 256 bins over [-1, 1]: the left edges -1, -1 + 2/256, ..., 1 - 2/256.
STATE_BIN_EDGES = np.linspace(-1.0, 1.0, 256 + 1)[:-1]


class TokenizerError(VlashError, RuntimeError):
    """The tokenizer cannot be loaded or cannot encode a prompt."""


class PromptTokenizer:
    """Text -> ids from a local ``tokenizer.json`` (tokenizers) or ``tokenizer.model`` (sentencepiece)."""

    def __init__(self, encode_fn: Callable[[str], list[int]], bos_id: int, vocab_size: int, source: Path):
        if not 0 <= bos_id < vocab_size:
            raise TokenizerError(f"{source}: bos_id {bos_id} is outside the vocabulary [0, {vocab_size})")
        self._encode_fn = encode_fn
        self._bos_id = bos_id
        self._vocab_size = vocab_size
        self.source = source  # the file the tokenizer was loaded from

    @classmethod
    def from_dir(
        cls,
        path: str | os.PathLike[str],
        *,
        bos_token: str | None = None,
        bos_id: int | None = None,
        prefer: str = "json",
    ) -> PromptTokenizer:
        """Load from a directory (or directly from a ``tokenizer.json`` / ``tokenizer.model`` file).

        ``prefer`` ("json" or "sentencepiece") picks the file when a directory holds both. ``bos_id`` or
        ``bos_token`` override the BOS found in the files. Never downloads anything.
        """
        if prefer not in ("json", "sentencepiece"):
            raise TokenizerError(f"prefer must be 'json' or 'sentencepiece', got {prefer!r}")
        p = Path(path)
        if p.is_file():
            candidates = [p]
        else:
            order = [TOKENIZER_JSON, SENTENCEPIECE_MODEL]
            candidates = [p / name for name in (order if prefer == "json" else order[::-1])]
        for file in candidates:
            if file.is_file():
                if file.suffix == ".json":
                    return _load_tokenizers_json(cls, file, bos_token, bos_id)
                return _load_sentencepiece(cls, file, bos_token, bos_id)
        looked = ", ".join(str(c) for c in candidates)
        raise TokenizerError(f"no tokenizer file found; looked for: {looked} (PaliGemma's tokenizer.json or .model)")

    @property
    def bos_id(self) -> int:
        return self._bos_id

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def encode(self, text: str, add_bos: bool) -> list[int]:
        """Token ids of ``text``, with no special tokens except a leading BOS when ``add_bos``."""
        ids = list(self._encode_fn(text))
        return [self._bos_id, *ids] if add_bos else ids


def _config_bos_token(directory: Path) -> str | None:
    """The ``bos_token`` named by a Hugging Face ``tokenizer_config.json`` next to the tokenizer, if any."""
    cfg_path = directory / "tokenizer_config.json"
    if not cfg_path.is_file():
        return None
    try:
        bos = json.loads(cfg_path.read_text()).get("bos_token")
    except (json.JSONDecodeError, AttributeError):
        return None
    if isinstance(bos, dict):
        bos = bos.get("content")
    return bos if isinstance(bos, str) else None


def _load_tokenizers_json(
    cls: type[PromptTokenizer], file: Path, bos_token: str | None, bos_id: int | None
) -> PromptTokenizer:
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as e:  # the tokenizers library raises a bare Exception on bad files
        raise TokenizerError(f"cannot load {file}: {e}") from e
    tok.no_padding()  # a tokenizer.json may carry padding/truncation settings; we pad ourselves
    tok.no_truncation()
    if bos_id is None:
        names = [bos_token] if bos_token else [n for n in (_config_bos_token(file.parent), *BOS_CANDIDATES) if n]
        bos_id = next((i for n in names if (i := tok.token_to_id(n)) is not None), None)
        if bos_id is None:
            raise TokenizerError(f"{file}: none of the BOS tokens {names} is in the vocabulary; pass bos_id=")

    def encode(text: str) -> list[int]:
        # add_special_tokens=False: the post-processor must not add a second BOS.
        return tok.encode(text, add_special_tokens=False).ids

    return cls(encode, bos_id, tok.get_vocab_size(with_added_tokens=True), file)


def _load_sentencepiece(
    cls: type[PromptTokenizer], file: Path, bos_token: str | None, bos_id: int | None
) -> PromptTokenizer:
    sp = sentencepiece.SentencePieceProcessor()
    try:
        sp.Load(str(file))
    except (OSError, RuntimeError) as e:
        raise TokenizerError(f"cannot load {file}: {e}") from e
    if bos_id is None and bos_token is not None:
        bos_id = sp.piece_to_id(bos_token)
        if bos_id == sp.unk_id() and bos_token != sp.id_to_piece(sp.unk_id()):
            raise TokenizerError(f"{file}: BOS token {bos_token!r} is not in the vocabulary")
    if bos_id is None:
        bos_id = sp.bos_id()
        if bos_id < 0:
            raise TokenizerError(f"{file}: the model defines no BOS token; pass bos_id= or bos_token=")
    return cls(lambda text: sp.encode(text, out_type=int), bos_id, sp.get_piece_size(), file)


def discretize_state(state: np.ndarray | torch.Tensor) -> np.ndarray:
    """256-bin ids of a normalized state, exactly ``np.digitize(state, STATE_BIN_EDGES) - 1`` as in openpi.

    Values in [-1, 1) fall in bins 0..255 (-1 -> 0; 1 and above -> 255; NaN -> 255). Values below -1 give
    -1, as in openpi and LeRobot (no clamping there, so none here). Returns int64 with the input's shape.
    """
    if isinstance(state, torch.Tensor):
        state = state.detach().cpu()
        state = (state if state.dtype in (torch.float32, torch.float64) else state.float()).numpy()
    return (np.digitize(np.asarray(state), bins=STATE_BIN_EDGES) - 1).astype(np.int64)


def clean_prompt(prompt: str) -> str:
    """openpi's prompt cleanup: strip, then underscores and newlines become spaces."""
    return prompt.strip().replace("_", " ").replace("\n", " ")


@dataclass(frozen=True)
class Pi05PromptEncoder:
    """pi0.5 language input: task prompt + discretized state -> (ids, mask), both ``[max_len]``."""

    tokenizer: PromptTokenizer  # text -> ids, from local files
    max_len: int = 200  # token budget (openpi Pi0Config(pi05=True).max_token_len, LeRobot tokenizer_max_length)
    state_dims: int | None = None  # leading state entries put in the prompt; None = all that are given
    pad_id: int = 0  # id after the prompt (openpi pads with 0; PaliGemma's <pad> is 0)
    state_in_prompt: bool = True  # False: the prompt carries no state (openpi discrete_state_input=False)
    pad_state_to: int | None = None  # zero-pad the normalized state to this many entries before binning (LeRobot 0.4)

    def __post_init__(self) -> None:
        if not isinstance(self.tokenizer, PromptTokenizer):
            raise TokenizerError(f"tokenizer must be a PromptTokenizer, got {type(self.tokenizer).__name__}")
        if self.max_len < 1:
            raise TokenizerError(f"max_len must be >= 1, got {self.max_len}")
        if self.state_dims is not None and self.state_dims < 1:
            raise TokenizerError(f"state_dims must be >= 1 or None, got {self.state_dims}")
        if self.pad_state_to is not None and self.pad_state_to < 1:
            raise TokenizerError(f"pad_state_to must be >= 1 or None, got {self.pad_state_to}")
        if not 0 <= self.pad_id < self.tokenizer.vocab_size:
            raise TokenizerError(f"pad_id {self.pad_id} is outside the vocabulary [0, {self.tokenizer.vocab_size})")

    def format_prompt(self, prompt: str, state: np.ndarray | torch.Tensor) -> str:
        """The text that gets tokenized, for one prompt and one 1-D normalized state."""
        if not isinstance(prompt, str):
            raise TokenizerError(f"prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
        bins = discretize_state(state)
        if bins.ndim != 1:
            raise TokenizerError(f"state must be 1-D for one prompt, got shape {bins.shape}")
        if self.state_dims is not None:
            if bins.shape[0] < self.state_dims:
                raise TokenizerError(f"state has {bins.shape[0]} entries, fewer than state_dims={self.state_dims}")
            bins = bins[: self.state_dims]
        if self.pad_state_to is not None and len(bins) < self.pad_state_to:  # a 0.0 entry falls in bin 128
            bins = np.concatenate([bins, discretize_state(np.zeros(self.pad_state_to - len(bins)))])
        return f"Task: {clean_prompt(prompt)}, State: {' '.join(map(str, bins))};\nAction: "

    def _token_ids(self, prompt: str, state: np.ndarray | torch.Tensor) -> list[int]:
        if self.state_in_prompt:
            return self.tokenizer.encode(self.format_prompt(prompt, state), add_bos=True)
        if not isinstance(prompt, str):
            raise TokenizerError(f"prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
        return self.tokenizer.encode(clean_prompt(prompt), add_bos=True) + self.tokenizer.encode("\n", add_bos=False)

    def encode(self, prompt: str, state: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 ``[max_len]``, mask bool ``[max_len]``); mask is True on real tokens."""
        tokens = self._token_ids(prompt, state)
        if len(tokens) > self.max_len:
            log.warning(
                "prompt is %d tokens, more than max_len=%d; truncating (raise max_len if this repeats)",
                len(tokens),
                self.max_len,
            )
            tokens = tokens[: self.max_len]
        ids = np.full(self.max_len, self.pad_id, dtype=np.int64)
        ids[: len(tokens)] = tokens
        mask = np.zeros(self.max_len, dtype=bool)
        mask[: len(tokens)] = True
        return ids, mask

    def encode_batch(self, prompts: Sequence[str], states: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 ``[B, max_len]``, mask bool ``[B, max_len]``) for B prompts and states ``[B, D]``."""
        if isinstance(prompts, str):
            raise TokenizerError("encode_batch takes a sequence of prompts, got a single str")
        if len(states) != len(prompts):
            raise TokenizerError(f"{len(prompts)} prompts but {len(states)} states")
        pairs = [self.encode(p, s) for p, s in zip(prompts, states, strict=True)]
        if not pairs:
            return np.zeros((0, self.max_len), np.int64), np.zeros((0, self.max_len), bool)
        ids, masks = zip(*pairs, strict=True)
        return np.stack(ids), np.stack(masks)
