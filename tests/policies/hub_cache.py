"""A Hugging Face Hub cache entry built from local files, laid out as huggingface_hub writes one
(models--OWNER--NAME/{refs/main, snapshots/COMMIT/...}), so name resolution is tested offline."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


def write_hub_repo(cache: Path, repo_id: str, files: list[Path]) -> Path:
    """Cache `files` (each copied by its name) as `repo_id` at revision main; returns the snapshot folder."""
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in files:
        shutil.copy(file, snapshot / file.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot
