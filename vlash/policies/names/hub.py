"""Checkpoints and tokenizers named the way the ecosystem names them: a Hugging Face Hub repo id (`owner/name`, as
LeRobot's `--policy.path=lerobot/pi05_libero_finetuned_v044`), resolved through huggingface_hub to a local folder.

The local cache comes first (no network); a repo that is not there is downloaded when the machine is online, with
huggingface_hub's progress bars; `HF_HUB_OFFLINE=1` keeps everything local. Read at call time: HF_HUB_OFFLINE,
HF_HUB_CACHE (else HF_HOME/hub, else huggingface_hub's default), HF_TOKEN for gated repos.

    folder = hub_snapshot("lerobot/pi05_base", "--checkpoint")    # HubUnavailable in one line when it cannot
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


def cached_repo(repo_id: str, allow_patterns: list[str] | None = None) -> Path | None:
    """`cached_snapshot`, or None where huggingface_hub is not installed (nothing can be cached then)."""
    try:
        return cached_snapshot(repo_id, allow_patterns)
    except ImportError:
        return None


class HubUnavailable(CheckpointError):
    """A Hub repo that is neither cached nor downloadable: `why` ("is gated") and `fix` (what to do) are clauses
    that callers which name the repo their own way compose into their message."""

    def __init__(self, flag: str, repo_id: str, why: str, fix: str) -> None:
        self.repo_id, self.why, self.fix = repo_id, why, fix
        super().__init__(
            f"{flag} {repo_id!r}: no such local path, and the Hugging Face repo {repo_id} {why}: {fix}, or give a "
            "local folder"
        )


def hub_snapshot(repo_id: str, flag: str, allow_patterns: list[str] | None = None, purpose: str = "") -> Path:
    """`repo_id`'s folder: from the cache, else downloaded (online; `purpose` says what it is for in the line that
    announces the download). HubUnavailable naming `flag` and what to do when it is neither cached nor
    downloadable."""
    folder = cached_snapshot(repo_id, allow_patterns)
    if folder is not None:
        return folder
    if hub_offline():
        where = hub_cache_dir() or "huggingface_hub's cache"
        fix = f"download it where there is a network (`hf download {repo_id}`)"
        raise HubUnavailable(flag, repo_id, f"is not in {where}, and HF_HUB_OFFLINE is set", fix)
    return _download(repo_id, flag, allow_patterns, purpose)


def hub_repo_files(repo_id: str) -> list[str] | None:
    """The file names of a Hub repo (one listing request, nothing downloaded); None when it cannot be listed
    (offline, gated, absent, unreachable): the download that follows says why."""
    if hub_offline():
        return None
    from huggingface_hub import HfApi  # extra: server
    from huggingface_hub.errors import HfHubHTTPError  # extra: server

    try:
        return list(HfApi().list_repo_files(repo_id))
    except (HfHubHTTPError, OSError, ValueError):
        return None


def _download(repo_id: str, flag: str, allow_patterns: list[str] | None, purpose: str) -> Path:
    from huggingface_hub import snapshot_download  # extra: server
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError  # extra: server

    what = f"{repo_id} ({purpose})" if purpose else repo_id
    print(f"vlash: downloading {what} from the Hugging Face Hub (cached for next time)", file=sys.stderr)
    try:
        return Path(snapshot_download(repo_id, cache_dir=hub_cache_dir(), allow_patterns=allow_patterns))
    except GatedRepoError:
        fix = "accept its license on huggingface.co and log in (`hf auth login`, or HF_TOKEN)"
        raise HubUnavailable(flag, repo_id, "is gated", fix) from None
    except RepositoryNotFoundError:
        raise HubUnavailable(
            flag, repo_id, "does not exist", "check the name, or log in (HF_TOKEN) if it is private"
        ) from None
    except (HfHubHTTPError, OSError) as exc:
        first = str(exc).strip().splitlines()[0].removeprefix("Got: ") if str(exc).strip() else type(exc).__name__
        fix = "retry where the Hub is reachable"
        raise HubUnavailable(flag, repo_id, f"cannot be downloaded ({first})", fix) from None
