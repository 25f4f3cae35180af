"""The Hugging Face Hub as huggingface_hub's `snapshot_download` and `HfApi.list_repo_files` see it while online,
with no network: repos are local files given by the test (or gated), and every download and listing is recorded.
Local-only lookups (`local_files_only=True`) find what was downloaded or put in the cache here."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub
from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError


def gated(repo_id: str) -> GatedRepoError:
    error = GatedRepoError.__new__(GatedRepoError)  # its constructor wants an HTTP response
    Exception.__init__(error, f"403: {repo_id} is gated")
    return error


class FakeHub:
    def __init__(self, monkeypatch, root: Path) -> None:
        self.root = root
        self.repos: dict[str, list[Path]] = {}  # repo id -> the files it holds
        self.gated: set[str] = set()
        self.cached: dict[str, Path] = {}  # repo id -> its snapshot folder
        self.downloads: list[str] = []  # repo ids downloaded, in order
        self.listed: list[str] = []  # repo ids listed
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online: hub.py would download
        monkeypatch.setattr(huggingface_hub, "snapshot_download", self.snapshot_download)
        monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", self._list_method())

    def add(self, repo_id: str, files: list[Path], cached: bool = False) -> None:
        self.repos[repo_id] = list(files)
        if cached:
            self.cached[repo_id] = self._write(repo_id)

    def _write(self, repo_id: str) -> Path:
        folder = self.root / repo_id.replace("/", "--")
        folder.mkdir(parents=True, exist_ok=True)
        for file in self.repos[repo_id]:
            shutil.copy(file, folder / file.name)
        return folder

    def snapshot_download(self, repo_id: str, local_files_only: bool = False, **kwargs) -> str:
        if local_files_only:
            if repo_id in self.cached:
                return str(self.cached[repo_id])
            raise LocalEntryNotFoundError(f"{repo_id} is not cached")
        self.downloads.append(repo_id)
        if repo_id in self.gated:
            raise gated(repo_id)
        if repo_id not in self.repos:
            raise OSError(f"no repo {repo_id} on this fake Hub")
        self.cached[repo_id] = self._write(repo_id)
        return str(self.cached[repo_id])

    def _list_method(self):
        def list_repo_files(api, repo_id: str, **kwargs) -> list[str]:
            self.listed.append(repo_id)
            if repo_id in self.gated:
                raise gated(repo_id)
            if repo_id not in self.repos:
                raise OSError(f"no repo {repo_id} on this fake Hub")
            return [file.name for file in self.repos[repo_id]]

        return list_repo_files
