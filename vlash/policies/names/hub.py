"""Checkpoints and tokenizers named the way the ecosystem names them: a Hugging Face Hub repo id (`owner/name`, as
LeRobot's `--policy.path=lerobot/pi05_libero_finetuned_v044`), resolved through huggingface_hub to a local folder.

The local cache comes first (no network); a repo that is not there is downloaded when the machine is online, with
huggingface_hub's progress bars; `HF_HUB_OFFLINE=1` keeps everything local. Read at call time: HF_HUB_OFFLINE,
HF_HUB_CACHE (else HF_HOME/hub, else huggingface_hub's default), HF_TOKEN for gated repos.

    folder = hub_snapshot("lerobot/pi05_base", "--checkpoint")    # CheckpointError in one line when it cannot
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from vlash.errors import CheckpointError

# owner/name: what the Hub accepts as a model repo id (letters, digits, "-", "_", "."; one slash)
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
# presets whose real weights have a Hub checkpoint: what `--policy NAME` loads where a command needs weights
BASE_CHECKPOINTS = {"pi05": "lerobot/pi05_base"}
PALIGEMMA_TOKENIZER = "google/paligemma-3b-pt-224"  # pi0.5's tokenizer (a gated repo: accept its license, HF_TOKEN)
TOKENIZER_FILES = ["tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
TRUE = ("1", "true", "yes", "on")


def looks_like_hub_id(value: str) -> bool:
    """True for `owner/name` (one slash, not starting with . / ~): a repo id where no such local path exists."""
    return HUB_ID.fullmatch(value) is not None and not value.endswith(".")


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE


def hub_cache_dir() -> str | None:
    """The cache folder huggingface_hub uses (None: its own default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None


def cached_snapshot(repo_id: str, allow_patterns: list[str] | None = None) -> Path | None:
    """The repo's folder in the local cache, or None (no network)."""
    from huggingface_hub import snapshot_download  # extra: server
    from huggingface_hub.errors import LocalEntryNotFoundError  # extra: server

    try:
        folder = snapshot_download(
            repo_id, cache_dir=hub_cache_dir(), local_files_only=True, allow_patterns=allow_patterns
        )
    except LocalEntryNotFoundError:
        return None
    return Path(folder)


def hub_snapshot(repo_id: str, flag: str, allow_patterns: list[str] | None = None) -> Path:
    """`repo_id`'s folder: from the cache, else downloaded (online). CheckpointError naming `flag` and what to do
    when it is neither cached nor downloadable."""
    folder = cached_snapshot(repo_id, allow_patterns)
    if folder is not None:
        return folder
    where = hub_cache_dir() or "huggingface_hub's cache"
    if hub_offline():
        raise CheckpointError(
            f"{flag} {repo_id!r}: no such local path, and the Hugging Face repo {repo_id} is not in {where} "
            "(HF_HUB_OFFLINE is set: download it on a machine that is online, or give a local folder)"
        )
    return _download(repo_id, flag, allow_patterns)


def _download(repo_id: str, flag: str, allow_patterns: list[str] | None) -> Path:
    from huggingface_hub import snapshot_download  # extra: server
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError  # extra: server

    print(f"vlash: downloading {repo_id} from the Hugging Face Hub (cached for next time)", file=sys.stderr)
    try:
        return Path(snapshot_download(repo_id, cache_dir=hub_cache_dir(), allow_patterns=allow_patterns))
    except GatedRepoError:
        raise CheckpointError(
            f"{flag} {repo_id!r} is a gated Hugging Face repo: accept its license on huggingface.co and log in "
            "(`hf auth login`, or HF_TOKEN)"
        ) from None
    except RepositoryNotFoundError:
        raise CheckpointError(
            f"{flag} {repo_id!r}: no such local path, and no Hugging Face repo of that name (or it is private: log "
            "in with HF_TOKEN)"
        ) from None
    except (HfHubHTTPError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{flag} {repo_id!r}: cannot download it from the Hugging Face Hub: {first}") from None
